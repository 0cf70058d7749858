/// A polygon: an outer ring with optional holes.
///
/// A point on any ring's boundary — the outer ring or a hole's — belongs to the polygon,
/// so a point on a hole's edge is inside the fence. Holes are assumed to lie inside the outer
/// ring and not to overlap (as GeoJSON requires); this is not checked.
public struct Polygon: Sendable, Hashable {
    /// The outer boundary.
    public let outer: Ring
    /// Areas cut out of the polygon.
    public let holes: [Ring]

    /// Creates a polygon from its rings.
    public init(outer: Ring, holes: [Ring] = []) {
        self.outer = outer
        self.holes = holes
    }

    /// Creates a polygon from GeoJSON `coordinates`: `[outer, hole…]`, each `[[lon, lat], …]`.
    public init(geoJSON rings: [[[Double]]]) throws(GeometryError) {
        guard let first = rings.first else { throw .emptyPolygon }
        let outer: Ring
        do { outer = try Ring(geoJSON: first) } catch { throw error.at(ring: 0) }
        var holes = [Ring]()
        holes.reserveCapacity(rings.count - 1)
        for (i, ring) in rings.enumerated().dropFirst() {
            do { holes.append(try Ring(geoJSON: ring)) } catch { throw error.at(ring: i) }
        }
        self.init(outer: outer, holes: holes)
    }

    /// The bounding box (the outer ring's).
    @inlinable public var box: GeoBox { outer.box }

    /// Where the point lies; on the edge of the outer ring or of a hole is `.boundary`.
    public func locate(_ point: GeoPoint) -> PointLocation {
        let outerLocation = outer.locate(point)
        guard outerLocation == .inside else { return outerLocation }
        for hole in holes {
            switch hole.locate(point) {
            case .outside: continue
            case .boundary: return .boundary
            case .inside: return .outside
            }
        }
        return .inside
    }

    /// Whether the point is in the polygon, boundaries (outer and holes) included.
    @inlinable
    public func contains(_ point: GeoPoint) -> Bool { locate(point) != .outside }
}

/// Several polygons forming one fence.
public struct MultiPolygon: Sendable, Hashable {
    /// The member polygons.
    public let polygons: [Polygon]
    /// Smallest box covering every polygon.
    public let box: GeoBox

    /// Creates a multipolygon; throws ``GeometryError/emptyPolygon`` when `polygons` is empty.
    public init(_ polygons: [Polygon]) throws(GeometryError) {
        guard let first = polygons.first else { throw .emptyPolygon }
        self.polygons = polygons
        box = polygons.dropFirst().reduce(first.box) { $0.union($1.box) }
    }

    /// Creates a multipolygon from GeoJSON `coordinates`: `[[outer, hole…], …]`.
    public init(geoJSON polygons: [[[[Double]]]]) throws(GeometryError) {
        var built = [Polygon]()
        built.reserveCapacity(polygons.count)
        for (i, polygon) in polygons.enumerated() {
            do { built.append(try Polygon(geoJSON: polygon)) } catch { throw error.at(polygon: i) }
        }
        try self.init(built)
    }

    /// Where the point lies: inside or on the boundary of any member counts.
    public func locate(_ point: GeoPoint) -> PointLocation {
        var best = PointLocation.outside
        // Each ring rejects on its own box first, so no separate box test here.
        for polygon in polygons {
            switch polygon.locate(point) {
            case .inside: return .inside
            case .boundary: best = .boundary
            case .outside: continue
            }
        }
        return best
    }

    /// Whether the point is in (or on the boundary of) any member polygon.
    @inlinable
    public func contains(_ point: GeoPoint) -> Bool { locate(point) != .outside }
}
