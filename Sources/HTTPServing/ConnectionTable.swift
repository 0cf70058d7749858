import Dispatch
import GatewayCore
import Locking
import Synchronization

/// What the callbacks of one server share: its limits, handler, counters and connection table.
final class Core: Sendable {
    let limits: HTTPServer.Limits
    let handler: HTTPServer.Handler
    let stats = StatisticsCounters()
    let stopping = Atomic<Bool>(false)
    private let table = Locked(Table())

    /// Every open connection, and how many come from each address.
    private struct Table {
        var records: [ObjectIdentifier: ConnectionRecord] = [:]
        var perAddress: [[UInt8]: Int] = [:]
    }

    init(limits: HTTPServer.Limits, handler: @escaping HTTPServer.Handler) {
        self.limits = limits
        self.handler = handler
    }

    var isStopping: Bool { stopping.load(ordering: .sequentiallyConsistent) }

    /// Whether a connection from `address` fits the limits; counts the refusal when not.
    func admit(_ address: [UInt8]) -> Bool {
        table.withLock { t in
            if t.records.count >= limits.connections {
                stats.refusedLimit.add(1, ordering: .relaxed)
                return false
            }
            if limits.connectionsPerAddress > 0 && t.perAddress[address, default: 0] >= limits.connectionsPerAddress {
                stats.refusedPerAddress.add(1, ordering: .relaxed)
                return false
            }
            return true
        }
    }

    func opened(_ record: ConnectionRecord) {
        table.withLock { t in
            t.records[ObjectIdentifier(record)] = record
            t.perAddress[record.addressKey, default: 0] += 1
        }
        stats.accepted.add(1, ordering: .relaxed)
        stats.open.add(1, ordering: .relaxed)
    }

    /// Called before libmicrohttpd closes the descriptor: from here on the sweep leaves it alone.
    func closed(_ record: ConnectionRecord) {
        table.withLock { t in
            t.records[ObjectIdentifier(record)] = nil
            if let n = t.perAddress[record.addressKey] { t.perAddress[record.addressKey] = n > 1 ? n - 1 : nil }
            record.request = nil
            record.stream = nil
        }
        stats.open.subtract(1, ordering: .relaxed)
    }

    func attach(_ exchange: RequestExchange) {
        guard let record = exchange.record else { return }
        table.withLock { _ in record.request = exchange }
    }

    func attach(_ stream: StreamExchange) {
        guard let record = stream.record else { return }
        table.withLock { _ in record.stream = stream }
    }

    func detach(_ stream: StreamExchange) {
        guard let record = stream.record else { return }
        table.withLock { _ in if record.stream === stream { record.stream = nil } }
    }

    /// The request is complete: its deadline no longer applies.
    func received(_ record: ConnectionRecord?) {
        guard let record else { return }
        table.withLock { _ in record.receiving = false }
    }

    /// A request is over: the next one on the connection starts its deadline now.
    func completed(_ exchange: RequestExchange) {
        guard let record = exchange.record else { return }
        let now = HTTPServer.monotonicMilliseconds()
        table.withLock { _ in
            if record.request === exchange { record.request = nil }
            record.receiving = true
            record.requestStartedAt = now
        }
    }

    /// What must be resumed when the server stops.
    func suspendable() -> ([RequestExchange], [StreamExchange]) {
        table.withLock { t in (t.records.values.compactMap(\.request), t.records.values.compactMap(\.stream)) }
    }

    /// Cuts off requests past their deadline; ends streams whose client hung up.
    func sweep() {
        guard !isStopping else { return }
        let now = HTTPServer.monotonicMilliseconds()
        let deadline = limits.requestDeadline.milliseconds
        let gone: [StreamExchange] = table.withLock { t in
            var streams: [StreamExchange] = []
            var fds: [Int32] = []
            for record in t.records.values where record.fd >= 0 {
                if record.receiving && !record.deadlineHit && now - record.requestStartedAt >= deadline {
                    record.deadlineHit = true
                    // Counted before the client can see the end; not when the socket was no longer
                    // connected (ENOTCONN: the client left, and libmicrohttpd is closing it anyway).
                    stats.deadlineClosed.add(1, ordering: .relaxed)
                    if !HTTPServer.cutOff(record.fd) { stats.deadlineClosed.subtract(1, ordering: .relaxed) }
                }
                if let s = record.stream {
                    streams.append(s)
                    fds.append(record.fd)
                }
            }
            // Polled under the lock: a descriptor in the table is still this connection's.
            guard !fds.isEmpty else { return [] }
            return zip(streams, HTTPServer.hungUp(fds)).filter(\.1).map(\.0)
        }
        for s in gone { s.clientLeft() }
    }
}

/// One connection as the sweep sees it.
final class ConnectionRecord: @unchecked Sendable {
    // Unchecked Sendable: the vars are read and written only under the server's table lock.
    let fd: Int32
    let addressKey: [UInt8]
    let addressText: String
    /// When the current request began (monotonic milliseconds): accept, or the previous one's end.
    var requestStartedAt: Int64
    /// The current request is not complete yet: its deadline applies.
    var receiving = true
    var deadlineHit = false
    var request: RequestExchange?
    var stream: StreamExchange?

    init(fd: Int32, addressKey: [UInt8], addressText: String, now: Int64) {
        self.fd = fd
        self.addressKey = addressKey
        self.addressText = addressText
        self.requestStartedAt = now
    }
}
