/// Split JT/T 808 messages (attribute bit 13), put back together per terminal.
///
/// A long message goes as packets 1…total, each a frame of its own with consecutive serials;
/// the message's serial is the first packet's. Packets are kept by terminal, message id, first
/// serial and total until every one has arrived, in any order (a packet that arrives twice
/// replaces itself).
///
/// What is kept is bounded: ``Limits/maxBytes`` of bodies across every message (a packet that
/// would pass it drops its whole message, counted `split.too_large`) and ``Limits/maxMessages``
/// messages at once (the oldest is dropped, counted `split.evicted`). A terminal that shares the
/// room with others (``Room/share``: over UDP, or on a connection that has not authenticated as
/// it) holds at most a quarter of each, so that one terminal cannot crowd out another's message.
///
/// A message that has been quiet for a second is asked for its missing packets (``requests(now:quietSince:)``),
/// then again ``Limits/timeoutMilliseconds`` / ``Limits/maxRequests`` after each request, at
/// most ``Limits/maxRequests`` times; it is kept until ``Limits/timeoutMilliseconds`` after its
/// first packet, then dropped: `split.incomplete` when it was asked for, `split.expired` when it
/// was not (no requests: UDP).
struct JT808Split: Sendable {
    struct Limits: Sendable, Hashable {
        var maxBytes: Int
        var maxMessages: Int
        var timeoutMilliseconds: Int64
        var maxRequests: Int
    }

    /// How much of the room one terminal's packets may take.
    enum Room: Sendable, Hashable {
        /// All of it: the connection is the terminal's.
        case all
        /// A quarter of the bytes and of the messages: the room is shared.
        case share
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
        var lastRequest: Int64 = 0
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

    /// The time between two requests for one message's missing packets.
    var requestInterval: Int64 { max(1_000, limits.timeoutMilliseconds / Int64(max(1, limits.maxRequests))) }

    /// Adds a packet (`header.total` and `header.index` set, index within 1…total).
    mutating func add(_ header: JT808Wire.Header, body: UnsafeRawBufferPointer, now: Int64, room: Room = .all) -> Outcome {
        expire(now: now)
        guard let total = header.total, let index = header.index else { return .kept }
        var key = Key(phone: header.phone, messageID: header.messageID, firstSerial: header.serial &- (index &- 1), total: total)
        if pending[key] == nil, let asked = resentPacketKey(key, index: index) { key = asked }
        let isNew = pending[key] == nil
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
        let terminalBytes = room == .share ? keptBytes(of: header.phone) : bytes
        guard terminalBytes + entry.bytes <= (room == .share ? limits.maxBytes / 4 : limits.maxBytes),
              bytes + entry.bytes <= limits.maxBytes else {
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
        if isNew && room == .share {
            let own = pending.filter { $0.key.phone == header.phone }
            if own.count >= max(1, limits.maxMessages / 4), let oldest = own.min(by: { $0.value.started < $1.value.started }) {
                drop(oldest.key, counting: "split.evicted")
            }
        }
        if pending.count >= limits.maxMessages, let oldest = pending.min(by: { $0.value.started < $1.value.started }) {
            drop(oldest.key, counting: "split.evicted")
        }
        pending[key] = entry
        bytes += entry.bytes
        return .kept
    }

    /// Bytes kept for one terminal.
    private func keptBytes(of phone: [UInt8]) -> Int {
        pending.reduce(0) { $0 + ($1.key.phone == phone ? $1.value.bytes : 0) }
    }

    /// The messages quiet since `quietSince` that still miss packets and whose request is due,
    /// each with the missing indexes and the header to answer it; counts the request. A message
    /// is asked at most ``Limits/maxRequests`` times, ``requestInterval`` apart.
    mutating func requests(now: Int64, quietSince: Int64) -> [(header: JT808Wire.Header, missing: [UInt16])] {
        expire(now: now)
        var out: [(JT808Wire.Header, [UInt16])] = []
        for key in pending.keys.sorted(by: { pending[$0]!.started < pending[$1]!.started }) {
            guard var entry = pending[key], entry.lastPacket <= quietSince, entry.requests < limits.maxRequests,
                  entry.requests == 0 || now - entry.lastRequest >= requestInterval else { continue }
            entry.requests += 1
            entry.lastRequest = now
            pending[key] = entry
            let missing = (1...key.total).filter { entry.bodies[$0] == nil }
            out.append((entry.header, missing))
        }
        return out
    }

    /// The message a packet under a serial that opens none belongs to: a terminal may number a
    /// packet it sends again after 0x8003 anew. Taken only for a packet after the first (a new
    /// message starts with its first packet, and over TCP packets arrive in order), when exactly
    /// one message of that terminal, id and total was asked for and misses this index.
    private func resentPacketKey(_ key: Key, index: UInt16) -> Key? {
        guard index > 1 else { return nil }
        let candidates = pending.filter {
            $0.key.phone == key.phone && $0.key.messageID == key.messageID && $0.key.total == key.total
                && $0.value.requests > 0 && $0.value.bodies[index] == nil
        }
        return candidates.count == 1 ? candidates.first?.key : nil
    }

    /// Whether messages are being put together (the caller keeps calling ``requests(now:quietSince:)``).
    var isEmpty: Bool { pending.isEmpty }

    /// Drops every message (the connection ended); each is counted `split.incomplete`.
    mutating func dropAll() {
        for key in Array(pending.keys) { drop(key, counting: "split.incomplete") }
    }

    /// Takes the statistics gathered since the last call.
    mutating func takeCounts() -> [String] {
        defer { counts = [] }
        return counts
    }

    /// Drops the messages past their timeout.
    mutating func expire(now: Int64) {
        guard !pending.isEmpty else { return }
        for (key, entry) in pending where now - entry.started > limits.timeoutMilliseconds {
            drop(key, counting: entry.requests > 0 ? "split.incomplete" : "split.expired")
        }
    }

    private mutating func drop(_ key: Key, counting statistic: String) {
        guard let entry = pending.removeValue(forKey: key) else { return }
        bytes -= entry.bytes
        counts.append(statistic)
    }
}
