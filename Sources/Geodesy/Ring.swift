/// Where a point lies relative to a ring, polygon or other fence shape.
public enum PointLocation: Sendable, Hashable {
    /// Strictly outside.
    case outside
    /// On an edge or a vertex (within ``Ring/boundaryTolerance``).
    case boundary
    /// Strictly inside.
    case inside
}

/// A closed ring of vertices: the outline of a polygon or of one of its holes.
///
/// Edges are straight lines in longitude/latitude (the GeoJSON convention, RFC 7946 §3.1.1),
/// which is what fence editors draw on a web map; at fence scale the difference from a
/// geodesic is negligible. Longitudes are stored unwrapped relative to the first vertex:
/// each vertex lies within ±180° of it, so a ring crossing the antimeridian (170, 179, -179)
/// becomes (170, 179, 181). A ring must therefore span less than 180° of longitude on each
/// side of its first vertex; rings around a pole are not supported.
public struct Ring: Sendable, Hashable {
    /// Distance in degrees (~11 µm) within which a point counts as on an edge or vertex.
    ///
    /// Floating-point rounding makes an exact "on the line" test unreliable for points
    /// computed from other coordinates; this tolerance absorbs it while staying far below
    /// any real fence dimension.
    public static let boundaryTolerance = 1e-10

    /// Unwrapped longitudes of the vertices (without the closing repeat of the first).
    let xs: [Double]
    /// Latitudes of the vertices.
    let ys: [Double]
    /// Unwrapped longitude range of the vertices (may extend beyond ±180).
    let minX: Double, maxX: Double
    /// The ring's bounding box.
    public let box: GeoBox

    /// Creates a ring from its vertices; a closing vertex equal to the first is optional.
    ///
    /// Consecutive duplicate vertices are dropped. Throws ``GeometryError/tooFewVertices``
    /// when fewer than three distinct vertices remain, or ``GeometryError/malformedPosition``
    /// for a non-finite coordinate or |latitude| > 90.
    public init(_ points: [GeoPoint]) throws(GeometryError) {
        guard let first = points.first else { throw .tooFewVertices }
        let x0 = normalizeLongitude(first.longitude)
        var xs = [Double](), ys = [Double]()
        xs.reserveCapacity(points.count)
        ys.reserveCapacity(points.count)
        for (i, p) in points.enumerated() {
            guard p.latitude.isFinite, p.longitude.isFinite, abs(p.latitude) <= 90 else {
                throw GeometryError.malformedPosition.at(position: i)
            }
            let x = x0 + normalizeLongitude(p.longitude - x0)
            if let lastX = xs.last, let lastY = ys.last, lastX == x, lastY == p.latitude { continue }
            xs.append(x)
            ys.append(p.latitude)
        }
        // Drop the closing vertex (GeoJSON rings repeat the first position at the end).
        if xs.count > 1, let lastX = xs.last, let lastY = ys.last, lastX == xs[0], lastY == ys[0] {
            xs.removeLast()
            ys.removeLast()
        }
        guard xs.count >= 3 else { throw .tooFewVertices }
        self.xs = xs
        self.ys = ys
        minX = xs.min() ?? x0
        maxX = xs.max() ?? x0
        box = GeoBox(south: ys.min() ?? 0, north: ys.max() ?? 0, unwrappedWest: minX, east: maxX)
    }

    /// Creates a ring from GeoJSON positions `[[lon, lat], …]` (closed or not).
    public init(geoJSON positions: [[Double]]) throws(GeometryError) {
        var points = [GeoPoint]()
        points.reserveCapacity(positions.count)
        for (i, position) in positions.enumerated() {
            do {
                points.append(try GeoPoint(geoJSON: position))
            } catch {
                throw error.at(position: i)
            }
        }
        try self.init(points)
    }

    /// Number of distinct vertices (the closing repeat not counted).
    @inlinable public var count: Int { vertexCount }

    /// The vertices with unwrapped longitudes, without the closing repeat.
    public var points: [GeoPoint] { zip(ys, xs).map { GeoPoint(latitude: $0, longitude: $1) } }

    @usableFromInline var vertexCount: Int { xs.count }

    /// Where the point lies: inside, outside or on the boundary (edges and vertices).
    ///
    /// Crossing-number test on the unwrapped ring, preceded on each edge by an on-segment
    /// test so that boundary points are reported as such. O(n), allocation-free.
    public func locate(_ point: GeoPoint) -> PointLocation {
        let eps = Ring.boundaryTolerance
        let py = point.latitude
        guard py >= box.minLatitude - eps && py <= box.maxLatitude + eps else { return .outside }
        let px = unwrap(point.longitude)
        guard px >= minX - eps && px <= maxX + eps else { return .outside }
        return xs.withUnsafeBufferPointer { xs in
            ys.withUnsafeBufferPointer { ys in
                var inside = false
                var xj = xs[xs.count - 1], yj = ys[ys.count - 1]
                for i in 0..<xs.count {
                    let xi = xs[i], yi = ys[i]
                    // On-edge test, only when the point is in the edge's (slightly grown) box.
                    if py >= min(yi, yj) - eps && py <= max(yi, yj) + eps
                        && px >= min(xi, xj) - eps && px <= max(xi, xj) + eps {
                        let dx = xi - xj, dy = yi - yj
                        let cross = dx * (py - yj) - dy * (px - xj)
                        // |cross| / |edge| is the distance from the edge's line.
                        if cross * cross <= eps * eps * (dx * dx + dy * dy) { return .boundary }
                    }
                    if (yi > py) != (yj > py) {
                        let xCross = xj + (py - yj) * (xi - xj) / (yi - yj)
                        if px < xCross { inside.toggle() }
                    }
                    xj = xi
                    yj = yi
                }
                return inside ? .inside : .outside
            }
        }
    }

    /// Whether the point is inside or on the boundary.
    @inlinable
    public func contains(_ point: GeoPoint) -> Bool { locate(point) != .outside }

    /// The point's longitude moved by a multiple of 360 to the copy nearest the ring's range.
    @inline(__always)
    func unwrap(_ longitude: Double) -> Double {
        // Position relative to the ring's west edge, in -180..<180 around its middle.
        let middle = (minX + maxX) / 2
        return middle + normalizeLongitude(longitude - middle)
    }

    /// Calls `body` with each edge `(x0, y0, x1, y1)` in unwrapped degrees.
    @inline(__always)
    func forEachEdge(_ body: (Double, Double, Double, Double) -> Bool) -> Bool {
        xs.withUnsafeBufferPointer { xs in
            ys.withUnsafeBufferPointer { ys in
                var xj = xs[xs.count - 1], yj = ys[ys.count - 1]
                for i in 0..<xs.count {
                    if body(xj, yj, xs[i], ys[i]) { return true }
                    xj = xs[i]
                    yj = ys[i]
                }
                return false
            }
        }
    }
}
