/// Planar helpers shared by the fence shapes; coordinates are unwrapped degrees or local metres.
enum PlanarMath {
    /// Twice the signed area of (a, b, c): > 0 when c is left of a→b.
    @inline(__always)
    static func orient(_ ax: Double, _ ay: Double, _ bx: Double, _ by: Double, _ cx: Double, _ cy: Double) -> Double {
        (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
    }

    /// Whether segments p0–p1 and q0–q1 share a point (touching and collinear overlap included).
    @inline(__always)
    static func segmentsIntersect(
        _ p0x: Double, _ p0y: Double, _ p1x: Double, _ p1y: Double,
        _ q0x: Double, _ q0y: Double, _ q1x: Double, _ q1y: Double
    ) -> Bool {
        // Cheap box rejection first: most edges of a big ring are far from the segment.
        if max(p0x, p1x) < min(q0x, q1x) || max(q0x, q1x) < min(p0x, p1x)
            || max(p0y, p1y) < min(q0y, q1y) || max(q0y, q1y) < min(p0y, p1y) {
            return false
        }
        let d1 = orient(q0x, q0y, q1x, q1y, p0x, p0y)
        let d2 = orient(q0x, q0y, q1x, q1y, p1x, p1y)
        let d3 = orient(p0x, p0y, p1x, p1y, q0x, q0y)
        let d4 = orient(p0x, p0y, p1x, p1y, q1x, q1y)
        if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) {
            return true
        }
        // An endpoint on the other segment (the boxes overlap, so a zero orientation means contact).
        return (d1 == 0 && onSegment(q0x, q0y, q1x, q1y, p0x, p0y))
            || (d2 == 0 && onSegment(q0x, q0y, q1x, q1y, p1x, p1y))
            || (d3 == 0 && onSegment(p0x, p0y, p1x, p1y, q0x, q0y))
            || (d4 == 0 && onSegment(p0x, p0y, p1x, p1y, q1x, q1y))
    }

    /// Whether c, known to be collinear with a–b, lies within the segment's box.
    @inline(__always)
    static func onSegment(_ ax: Double, _ ay: Double, _ bx: Double, _ by: Double, _ cx: Double, _ cy: Double) -> Bool {
        cx >= min(ax, bx) && cx <= max(ax, bx) && cy >= min(ay, by) && cy <= max(ay, by)
    }

    /// Squared distance from the origin to segment a–b (local metres).
    @inline(__always)
    static func squaredDistanceToSegment(_ ax: Double, _ ay: Double, _ bx: Double, _ by: Double) -> Double {
        let dx = bx - ax, dy = by - ay
        let lengthSquared = dx * dx + dy * dy
        var t = lengthSquared > 0 ? -(ax * dx + ay * dy) / lengthSquared : 0
        t = min(1, max(0, t))
        let x = ax + t * dx, y = ay + t * dy
        return x * x + y * y
    }
}
