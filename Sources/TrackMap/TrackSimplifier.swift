import Geodesy

/// Douglas–Peucker with a point budget: keeps the vertices that matter most for the shape.
///
/// Instead of a fixed tolerance (which cannot promise a size), it keeps splitting the segment
/// whose farthest intermediate vertex is farthest from it, until the budget is spent; the
/// farthest distance left is the tolerance the result honours, in metres. Distances use a
/// local equirectangular projection at each segment's first vertex (WGS84 radii), which is
/// accurate at the scale of one segment. O(n log budget) for ordinary tracks.
public enum TrackSimplifier {
    /// The outcome: indices of the kept vertices (first and last always kept), ascending, and
    /// the largest distance in metres from a dropped vertex to the simplified line (0 when nothing was dropped).
    public struct Result: Sendable, Equatable {
        public var indices: [Int]
        public var toleranceMeters: Double
    }

    /// Simplifies the polyline `latitudes[i], longitudes[i]` to at most `maxPoints` vertices (at least 2).
    public static func simplify(latitudes: [Double], longitudes: [Double], maxPoints: Int) -> Result {
        let n = min(latitudes.count, longitudes.count)
        guard n > maxPoints, n > 2 else { return Result(indices: Array(0..<n), toleranceMeters: 0) }
        let budget = max(2, maxPoints)
        var keep = [Bool](repeating: false, count: n)
        keep[0] = true
        keep[n - 1] = true
        var kept = 2
        var heap = SegmentHeap()
        heap.push(farthest(latitudes, longitudes, from: 0, to: n - 1))
        while kept < budget, let top = heap.pop() {
            // Below a millimetre nothing drawn would change; floating-point noise on a straight line must not spend the budget.
            guard top.distance > 0.001 else { heap.push(top); break }
            keep[top.farthest] = true
            kept += 1
            heap.push(farthest(latitudes, longitudes, from: top.start, to: top.farthest))
            heap.push(farthest(latitudes, longitudes, from: top.farthest, to: top.end))
        }
        var indices = [Int]()
        indices.reserveCapacity(kept)
        for i in 0..<n where keep[i] { indices.append(i) }
        return Result(indices: indices, toleranceMeters: heap.peek?.distance ?? 0)
    }

    struct Segment {
        var start: Int
        var end: Int
        var farthest: Int
        var distance: Double
    }

    /// The vertex strictly between `start` and `end` farthest from the segment between them.
    static func farthest(_ lat: [Double], _ lon: [Double], from start: Int, to end: Int) -> Segment {
        var best = Segment(start: start, end: end, farthest: start, distance: 0)
        guard end - start > 1 else { return best }
        let scale = WGS84.metresPerDegree(atLatitude: lat[start])
        let lat0 = lat[start], lon0 = lon[start]
        let bx = normalizeLongitude(lon[end] - lon0) * scale.longitude
        let by = (lat[end] - lat0) * scale.latitude
        let length2 = bx * bx + by * by
        var bestSquared = -1.0
        lat.withUnsafeBufferPointer { lat in
            lon.withUnsafeBufferPointer { lon in
                for i in (start + 1)..<end {
                    let px = normalizeLongitude(lon[i] - lon0) * scale.longitude
                    let py = (lat[i] - lat0) * scale.latitude
                    var t = length2 > 0 ? (px * bx + py * by) / length2 : 0
                    t = min(1, max(0, t))
                    let dx = px - t * bx, dy = py - t * by
                    let d = dx * dx + dy * dy
                    if d > bestSquared { bestSquared = d; best.farthest = i }
                }
            }
        }
        best.distance = bestSquared.squareRoot()
        return best
    }

    /// A binary max-heap of segments by distance.
    struct SegmentHeap {
        private var items: [Segment] = []

        var peek: Segment? { items.first }

        mutating func push(_ s: Segment) {
            // Segments without an intermediate vertex have nothing to give.
            guard s.end - s.start > 1 else { return }
            items.append(s)
            var i = items.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard items[parent].distance < items[i].distance else { break }
                items.swapAt(parent, i)
                i = parent
            }
        }

        mutating func pop() -> Segment? {
            guard let top = items.first else { return nil }
            let last = items.removeLast()
            guard !items.isEmpty else { return top }
            items[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < items.count && items[l].distance > items[m].distance { m = l }
                if r < items.count && items[r].distance > items[m].distance { m = r }
                if m == i { break }
                items.swapAt(i, m)
                i = m
            }
            return top
        }
    }
}
