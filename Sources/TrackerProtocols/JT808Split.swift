/// Split JT/T 808 messages (attribute bit 13), put back together per terminal.
///
/// A long message goes as packets 1…total, each a frame of its own with consecutive serials;
/// the message's serial is the first packet's. Packets are kept by terminal, message id, first
/// serial and total until every one has arrived, in any order (a packet that arrives twice
/// replaces itself). What is kept is bounded: ``Limits/maxBytes`` of bodies across every message
/// (a packet that would pass it drops its whole message, counted `split.too_large`) and
/// ``Limits/maxMessages`` messages at once (the oldest is dropped, counted `split.evicted`). A
/// message not complete within ``Limits/timeoutMilliseconds`` of its first packet is dropped
/// (`split.expired`); one whose missing packets were asked for ``Limits/maxRequests`` times
/// without arriving is dropped when it is asked again (`split.incomplete`).
struct JT808Split: Sendable {
    struct Limits: Sendable, Hashable {
        var maxBytes: Int
        var maxMessages: Int
        var timeoutMilliseconds: Int64
        var maxRequests: Int
    }

    /// One message being put together.
    struct Key: Hashable, Sendable {
        var phone: [UInt8]
        var messageID: UInt16
        var firstSerial: UInt16
        var total: UInt16
    }

    struct Pending: Sendable {
        /// The header of the packet that opened it (its form and phone answer the message).
        var header: JT808Wire.Header
        var bodies: [UInt16: [UInt8]] = [:]
        var bytes = 0
        var started: Int64
        var lastPacket: Int64
        var requests = 0
    }

    /// What one packet did.
    enum Outcome {
        /// The message is whole: its first packet's header (serial = the message's) and body.
        case complete(header: JT808Wire.Header, body: [UInt8])
        /// Kept; more packets are awaited.
        case kept
        /// The message was dropped for its size.
        case tooLarge
    }

    let limits: Limits
    private(set) var pending: [Key: Pending] = [:]
    private(set) var bytes = 0
    /// Statistics to report at the next idle call.
    private(set) var counts: [String] = []

    init(limits: Limits) { self.limits = limits }

    /// Adds a packet (`header.total` and `header.index` set, index within 1…total).
    mutating func add(_ header: JT808Wire.Header, body: UnsafeRawBufferPointer, now: Int64) -> Outcome {
        expire(now: now)
        guard let total = header.total, let index = header.index else { return .kept }
        var key = Key(phone: header.phone, messageID: header.messageID, firstSerial: header.serial &- (index &- 1), total: total)
        if pending[key] == nil, let asked = resentPacketKey(key, index: index) { key = asked }
        var entry = pending.removeValue(forKey: key) ?? {
            var first = header
            first.serial = key.firstSerial
            return Pending(header: first, started: now, lastPacket: now)
        }()
        bytes -= entry.bytes
        if let old = entry.bodies[index] { entry.bytes -= old.count }
        entry.bodies[index] = Array(body)
        entry.bytes += body.count
        entry.lastPacket = now
        if index == 1 {
            entry.header = header
            entry.header.serial = key.firstSerial
        }
        guard bytes + entry.bytes <= limits.maxBytes else {
            counts.append("split.too_large")
            return .tooLarge
        }
        if entry.bodies.count == Int(total) {
            var whole: [UInt8] = []
            whole.reserveCapacity(entry.bytes)
            for k in 1...total { whole += entry.bodies[k] ?? [] }
            counts.append("split.completed")
            var first = entry.header
            first.total = nil
            first.index = nil
            return .complete(header: first, body: whole)
        }
        if pending.count >= limits.maxMessages, let oldest = pending.min(by: { $0.value.started < $1.value.started }) {
            drop(oldest.key, counting: "split.evicted")
        }
        pending[key] = entry
        bytes += entry.bytes
        return .kept
    }

    /// The messages quiet since `quietSince` that still miss packets, each with the missing
    /// indexes and the header to answer it; counts a request against each, and drops the ones
    /// asked for ``Limits/maxRequests`` times already.
    mutating func requests(now: Int64, quietSince: Int64) -> [(header: JT808Wire.Header, missing: [UInt16])] {
        expire(now: now)
        var out: [(JT808Wire.Header, [UInt16])] = []
        for key in pending.keys.sorted(by: { pending[$0]!.started < pending[$1]!.started }) {
            guard var entry = pending[key], entry.lastPacket <= quietSince else { continue }
            if entry.requests >= limits.maxRequests {
                drop(key, counting: "split.incomplete")
                continue
            }
            entry.requests += 1
            pending[key] = entry
            let missing = (1...key.total).filter { entry.bodies[$0] == nil }
            out.append((entry.header, missing))
        }
        return out
    }

    /// The message a packet under a new serial belongs to: a terminal may number a packet it
    /// sends again after 0x8003 anew. Taken only when exactly one message of that terminal, id
    /// and total was asked for and misses this index.
    private func resentPacketKey(_ key: Key, index: UInt16) -> Key? {
        let candidates = pending.filter {
            $0.key.phone == key.phone && $0.key.messageID == key.messageID && $0.key.total == key.total
                && $0.value.requests > 0 && $0.value.bodies[index] == nil
        }
        return candidates.count == 1 ? candidates.first?.key : nil
    }

    /// Drops every message (the connection ended); each is counted `split.incomplete`.
    mutating func dropAll() {
        for key in Array(pending.keys) { drop(key, counting: "split.incomplete") }
    }

    /// Takes the statistics gathered since the last call.
    mutating func takeCounts() -> [String] {
        defer { counts = [] }
        return counts
    }

    private mutating func expire(now: Int64) {
        guard !pending.isEmpty else { return }
        for (key, entry) in pending where now - entry.started > limits.timeoutMilliseconds {
            drop(key, counting: "split.expired")
        }
    }

    private mutating func drop(_ key: Key, counting statistic: String) {
        guard let entry = pending.removeValue(forKey: key) else { return }
        bytes -= entry.bytes
        counts.append(statistic)
    }
}
