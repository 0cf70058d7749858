/// The geometry of one fence: a circle, a polygon or a multipolygon.
///
/// Segment and distance queries use a local equirectangular projection (metres per degree
/// from the WGS84 radii of curvature at the query point, or at a circle's centre). Within a
/// fence's scale — up to tens of kilometres — that is accurate to better than 0.1 %; the
/// error grows with distance from the projection point, so treat distances of hundreds of
/// kilometres as estimates. Polygon edges are straight in longitude/latitude (see ``Ring``).
public enum FenceShape: Sendable, Hashable {
    /// Every point within a radius of a centre.
    case circle(Circle)
    /// One polygon, possibly with holes.
    case polygon(Polygon)
    /// Several polygons.
    case multiPolygon(MultiPolygon)

    /// A box containing the shape, for a ``FenceIndex``: every point ``locate(_:)`` does not call
    /// `.outside` is in it. A polygon's is its rings' box grown by twice ``Ring/boundaryTolerance``:
    /// a point that close outside the southernmost vertex is on the boundary, and an index that
    /// missed it made the fence's answer depend on whether it was asked through the index. Twice,
    /// because `locate` compares after unwrapping the point's longitude, which rounds: a point
    /// exactly the tolerance beyond a corner was on the boundary by an ulp and outside a box grown
    /// by exactly the tolerance (fuzz crash-e3ce17c5). A larger box only offers extra candidates.
    public var box: GeoBox {
        switch self {
        case .circle(let c): c.box
        case .polygon(let p): p.box.expanded(byDegrees: 2 * Ring.boundaryTolerance)
        case .multiPolygon(let m): m.box.expanded(byDegrees: 2 * Ring.boundaryTolerance)
        }
    }

    /// Where the point lies (a point on an edge, a vertex or a hole's edge is `.boundary`).
    public func locate(_ point: GeoPoint) -> PointLocation {
        switch self {
        case .circle(let c): c.locate(point)
        case .polygon(let p): p.locate(point)
        case .multiPolygon(let m): m.locate(point)
        }
    }

    /// Whether the point is inside the fence, boundary included.
    @inlinable
    public func contains(_ point: GeoPoint) -> Bool { locate(point) != .outside }

    /// Whether the straight segment between two fixes enters the shape (touching counts).
    ///
    /// Catches a sparse track that jumps across a fence with both fixes outside. The segment
    /// takes the short way round in longitude (across the antimeridian if shorter).
    public func segmentIntersects(from: GeoPoint, to: GeoPoint) -> Bool {
        switch self {
        case .circle(let c): c.segmentIntersects(from: from, to: to)
        case .polygon(let p): p.segmentIntersects(from: from, to: to)
        case .multiPolygon(let m): m.polygons.contains { $0.segmentIntersects(from: from, to: to) }
        }
    }

    /// Distance in metres from the point to the nearest boundary (edge of any ring, or the circle).
    public func distanceToBoundary(from point: GeoPoint) -> Double {
        switch self {
        case .circle(let c): c.distanceToBoundary(from: point)
        case .polygon(let p): p.distanceToBoundary(from: point)
        case .multiPolygon(let m): m.polygons.reduce(Double.infinity) { min($0, $1.distanceToBoundary(from: point)) }
        }
    }

    /// Distance to the boundary, negative inside: a border margin is `signedDistance < margin`.
    public func signedDistanceToBoundary(from point: GeoPoint) -> Double {
        let d = distanceToBoundary(from: point)
        return locate(point) == .inside ? -d : d
    }
}

// MARK: - Polygon queries

extension Polygon {
    /// Whether the straight segment between two points enters the polygon (touching counts).
    public func segmentIntersects(from: GeoPoint, to: GeoPoint) -> Bool {
        if contains(from) || contains(to) { return true }
        // Both ends outside: the segment enters only by crossing a ring.
        if outer.segmentCrosses(from: from, to: to) { return true }
        for hole in holes where hole.segmentCrosses(from: from, to: to) { return true }
        return false
    }

    /// Distance in metres from the point to the nearest edge of the outer ring or a hole.
    public func distanceToBoundary(from point: GeoPoint) -> Double {
        let scale = WGS84.metresPerDegree(atLatitude: point.latitude)
        var best = outer.squaredDistance(from: point, scale: scale)
        for hole in holes { best = min(best, hole.squaredDistance(from: point, scale: scale)) }
        return best.squareRoot()
    }
}

extension Circle {
    /// Whether the straight segment between two points comes within the radius.
    public func segmentIntersects(from: GeoPoint, to: GeoPoint) -> Bool {
        if contains(from) || contains(to) { return true }
        let scale = WGS84.metresPerDegree(atLatitude: center.latitude)
        let ax = normalizeLongitude(from.longitude - center.longitude) * scale.longitude
        let ay = (from.latitude - center.latitude) * scale.latitude
        let bx = ax + normalizeLongitude(to.longitude - from.longitude) * scale.longitude
        let by = (to.latitude - center.latitude) * scale.latitude
        return PlanarMath.squaredDistanceToSegment(ax, ay, bx, by) <= radiusMeters * radiusMeters
    }

    /// Distance in metres from the point to the circle (geodesic).
    public func distanceToBoundary(from point: GeoPoint) -> Double {
        abs(Geodesic.distance(from: center, to: point) - radiusMeters)
    }
}

// MARK: - Ring queries

extension Ring {
    /// Whether the segment touches any edge of the ring, trying each 360° copy the segment may reach.
    func segmentCrosses(from: GeoPoint, to: GeoPoint) -> Bool {
        let ax = unwrap(from.longitude)
        let bx = ax + normalizeLongitude(to.longitude - from.longitude)
        let ay = from.latitude, by = to.latitude
        let eps = Ring.boundaryTolerance
        if max(ay, by) < box.minLatitude - eps || min(ay, by) > box.maxLatitude + eps { return false }
        // A loop rather than an array literal of shifts keeps this allocation-free.
        var shift = -360.0
        while shift <= 360 {
            let sax = ax + shift, sbx = bx + shift
            shift += 360
            if max(sax, sbx) < minX - eps || min(sax, sbx) > maxX + eps { continue }
            let hit = forEachEdge { x0, y0, x1, y1 in
                PlanarMath.segmentsIntersect(sax, ay, sbx, by, x0, y0, x1, y1)
            }
            if hit { return true }
        }
        return false
    }

    /// Squared distance in metres from the point to the nearest edge, in a local projection at the point.
    func squaredDistance(from point: GeoPoint, scale: (latitude: Double, longitude: Double)) -> Double {
        let px = unwrap(point.longitude), py = point.latitude
        var best = Double.infinity
        _ = forEachEdge { x0, y0, x1, y1 in
            let d = PlanarMath.squaredDistanceToSegment(
                (x0 - px) * scale.longitude, (y0 - py) * scale.latitude,
                (x1 - px) * scale.longitude, (y1 - py) * scale.latitude)
            if d < best { best = d }
            return false
        }
        return best
    }
}
