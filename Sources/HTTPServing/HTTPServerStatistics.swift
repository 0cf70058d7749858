import Synchronization

extension HTTPServer {
    /// What a server did since it started (counters) and holds now (gauges), read with
    /// ``HTTPServer/statistics``.
    public struct Statistics: Sendable, Equatable {
        /// Connections accepted and served (refused ones are not counted here).
        public var accepted = 0
        /// Connections closed at accept because ``Limits/connections`` were open.
        public var refusedLimit = 0
        /// Connections closed at accept because ``Limits/connectionsPerAddress`` were open from
        /// the same address.
        public var refusedPerAddress = 0
        /// Connections disconnected because their request was not complete within
        /// ``Limits/requestDeadline``.
        public var deadlineClosed = 0
        /// Requests whose body was larger than ``Limits/maximumBodySize`` (answered `413`, or
        /// disconnected when the body was chunked).
        public var tooLarge = 0
        /// Requests answered `500` because their ``HTTPResponder`` was released without an answer.
        public var respondersDropped = 0
        /// Connections open now.
        public var open = 0
        /// Connections suspended now: requests waiting for their answer, streams waiting for data.
        public var suspended = 0

        /// All zero.
        public init() {}
    }
}

/// The counters behind ``HTTPServer/Statistics``, updated from the server's threads.
final class StatisticsCounters: Sendable {
    let accepted = Atomic<Int>(0)
    let refusedLimit = Atomic<Int>(0)
    let refusedPerAddress = Atomic<Int>(0)
    let deadlineClosed = Atomic<Int>(0)
    let tooLarge = Atomic<Int>(0)
    let respondersDropped = Atomic<Int>(0)
    let open = Atomic<Int>(0)
    let suspended = Atomic<Int>(0)

    var snapshot: HTTPServer.Statistics {
        var s = HTTPServer.Statistics()
        s.accepted = accepted.load(ordering: .relaxed)
        s.refusedLimit = refusedLimit.load(ordering: .relaxed)
        s.refusedPerAddress = refusedPerAddress.load(ordering: .relaxed)
        s.deadlineClosed = deadlineClosed.load(ordering: .relaxed)
        s.tooLarge = tooLarge.load(ordering: .relaxed)
        s.respondersDropped = respondersDropped.load(ordering: .relaxed)
        s.open = open.load(ordering: .relaxed)
        s.suspended = suspended.load(ordering: .relaxed)
        return s
    }
}
