/// A static spatial index over fence bounding boxes: an STR-packed R-tree.
///
/// Built once from `(id, box)` pairs (Sort-Tile-Recursive packing, 16 children per node),
/// it answers "which fences might contain this point / touch this box" in O(log n + k):
/// 10,000 fences cost a few more node visits per query than 10. Queries allocate nothing;
/// the `candidates` conveniences allocate their result array.
///
/// Boxes that cross the antimeridian are stored unwrapped (170…190) and queries try the
/// 360° copies of the query, so each id is reported at most once per query. The index
/// answers with candidates only: the caller still tests the exact shape.
public struct FenceIndex: Sendable {
    /// A rectangle in unwrapped longitude (x) and latitude (y).
    struct Rect: Sendable {
        var minX: Double, maxX: Double, minY: Double, maxY: Double
        @inline(__always) var centerX: Double { (minX + maxX) / 2 }
        @inline(__always) var centerY: Double { (minY + maxY) / 2 }
        @inline(__always) func union(_ o: Rect) -> Rect {
            Rect(minX: min(minX, o.minX), maxX: max(maxX, o.maxX), minY: min(minY, o.minY), maxY: max(maxY, o.maxY))
        }
    }

    /// A tree node or, at level 0, an entry (then `start` is the entry's index and `count` 0).
    struct Node: Sendable {
        var rect: Rect
        var start: Int32
        var count: Int32
    }

    /// Children per node: 16 keeps the tree shallow while a node's boxes share a cache line or two.
    static let capacity = 16

    private let ids: [Int]
    private let rects: [Rect]
    /// Every level in one array, leaves (the entries, `count` 0) first and the top level last;
    /// a node's `start` is the absolute index of its first child, so a query walks one buffer.
    private let nodes: [Node]
    /// Index range of the top level in ``nodes``.
    private let top: Range<Int>
    /// Depth-first stack size that cannot overflow: a full node's children per level, plus the top level.
    private let stackCapacity: Int
    /// Some box reaches longitude 180 (its stored copy runs past the antimeridian).
    private let crossesAntimeridian: Bool

    /// Number of indexed entries.
    public var count: Int { ids.count }

    /// Builds the index. Ids need not be unique or dense; each entry is reported with its id.
    public init(_ entries: [(id: Int, box: GeoBox)]) {
        ids = entries.map(\.id)
        rects = entries.map {
            Rect(minX: $0.box.minLongitude, maxX: $0.box.maxLongitude, minY: $0.box.minLatitude, maxY: $0.box.maxLatitude)
        }
        var level = rects.enumerated().map { Node(rect: $0.element, start: Int32($0.offset), count: 0) }
        var levels = [[Node]]()
        while level.count > Self.capacity || levels.isEmpty {
            let (ordered, parents) = Self.pack(level)
            levels.append(ordered)
            level = parents
            if ordered.count <= 1 { break }
        }
        if !level.isEmpty { levels.append(level) }
        // Concatenate levels, turning child offsets (relative to the level below) into absolute indices.
        var nodes = [Node]()
        nodes.reserveCapacity(levels.reduce(0) { $0 + $1.count })
        var belowBase = 0
        var top = 0..<0
        for (depth, levelNodes) in levels.enumerated() {
            let base = nodes.count
            for var node in levelNodes {
                if depth > 0 { node.start += Int32(belowBase) }
                nodes.append(node)
            }
            belowBase = base
            top = base..<nodes.count
        }
        self.nodes = nodes
        self.top = top
        crossesAntimeridian = rects.contains { $0.maxX >= 180 }
        stackCapacity = Self.capacity * (levels.count + 1)
    }

    /// Convenience: builds the index from shapes, using each shape's offset in the array as its id.
    public init(shapes: [FenceShape]) {
        self.init(shapes.enumerated().map { (id: $0.offset, box: $0.element.box) })
    }

    /// Sort-Tile-Recursive packing: sort by x into vertical slices, each slice by y, group runs.
    private static func pack(_ children: [Node]) -> (ordered: [Node], parents: [Node]) {
        let n = children.count
        guard n > 0 else { return ([], []) }
        let parentCount = (n + capacity - 1) / capacity
        let slices = Int(Double(parentCount).squareRoot().rounded(.up))
        let sliceSize = slices * capacity
        var ordered = children.sorted { $0.rect.centerX < $1.rect.centerX }
        var sliceStart = 0
        while sliceStart < n {
            let end = min(n, sliceStart + sliceSize)
            ordered[sliceStart..<end].sort { $0.rect.centerY < $1.rect.centerY }
            sliceStart = end
        }
        var parents = [Node]()
        parents.reserveCapacity(parentCount)
        var start = 0
        while start < n {
            let end = min(n, start + capacity)
            var rect = ordered[start].rect
            for i in (start + 1)..<end { rect = rect.union(ordered[i].rect) }
            parents.append(Node(rect: rect, start: Int32(start), count: Int32(end - start)))
            start = end
        }
        return (ordered, parents)
    }

    // MARK: - Queries

    /// Calls `body` with the id of every entry whose box contains the point (edges included).
    public func forEachCandidate(containing point: GeoPoint, _ body: (Int) throws -> Void) rethrows {
        let x = normalizeLongitude(point.longitude), y = point.latitude
        // Through buffer pointers: this runs once per position per geofence, and copies of the
        // arrays for the closures cost a retain and a release each.
        try ids.withUnsafeBufferPointer { ids in
            try search(Rect(minX: x, maxX: x, minY: y, maxY: y)) { entry in
                try body(ids[entry])
            }
            // Stored boxes start in -180..<180 and end before 540: x and x + 360 are the only
            // copies, and x + 360 (from 180 on) only meets boxes that cross the antimeridian.
            guard crossesAntimeridian else { return }
            try rects.withUnsafeBufferPointer { rects in
                try search(Rect(minX: x + 360, maxX: x + 360, minY: y, maxY: y)) { entry in
                    let r = rects[entry]
                    // Already reported by the first copy.
                    if r.minX <= x && r.maxX >= x { return }
                    try body(ids[entry])
                }
            }
        }
    }

    /// Calls `body` with the id of every entry whose box intersects `box` (edges included).
    public func forEachCandidate(intersecting box: GeoBox, _ body: (Int) throws -> Void) rethrows {
        let q = Rect(minX: box.minLongitude, maxX: box.maxLongitude, minY: box.minLatitude, maxY: box.maxLatitude)
        let ids = self.ids, rects = self.rects
        // Copies at -360, 0, +360 cover every overlap on the circle; report each entry at its first copy.
        var shift = -360.0
        while shift <= 360 {
            let current = shift
            try search(Rect(minX: q.minX + current, maxX: q.maxX + current, minY: q.minY, maxY: q.maxY)) { entry in
                let r = rects[entry]
                var earlier = -360.0
                while earlier < current {
                    if q.minX + earlier <= r.maxX && q.maxX + earlier >= r.minX { return }
                    earlier += 360
                }
                try body(ids[entry])
            }
            shift += 360
        }
    }

    /// The ids of entries whose box contains the point.
    public func candidates(containing point: GeoPoint) -> [Int] {
        var result = [Int]()
        forEachCandidate(containing: point) { result.append($0) }
        return result
    }

    /// The ids of entries whose box intersects `box`.
    public func candidates(intersecting box: GeoBox) -> [Int] {
        var result = [Int]()
        forEachCandidate(intersecting: box) { result.append($0) }
        return result
    }

    /// Depth-first search from the top level; `body` gets entry indices whose rect meets `q`.
    ///
    /// Iterative with a stack on the call frame (`withUnsafeTemporaryAllocation`): recursion
    /// through a closure made Swift copy the index's arrays at every node.
    @inline(__always)
    private func search(_ q: Rect, _ body: (Int) throws -> Void) rethrows {
        let top = self.top
        try nodes.withUnsafeBufferPointer { nodes in
            try withUnsafeTemporaryAllocation(of: Int32.self, capacity: stackCapacity) { stack in
                var depth = 0
                for i in top {
                    stack[depth] = Int32(i)
                    depth += 1
                }
                while depth > 0 {
                    depth -= 1
                    let node = nodes[Int(stack[depth])]
                    let r = node.rect
                    guard r.minX <= q.maxX && r.maxX >= q.minX && r.minY <= q.maxY && r.maxY >= q.minY else { continue }
                    if node.count == 0 {
                        try body(Int(node.start))
                        continue
                    }
                    let start = Int(node.start)
                    for i in start..<(start + Int(node.count)) {
                        stack[depth] = Int32(i)
                        depth += 1
                    }
                }
            }
        }
    }
}
