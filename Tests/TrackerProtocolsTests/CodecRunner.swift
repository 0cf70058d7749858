import GatewayCore
import TrackerProtocols

/// What a codec said about a stream, in order: the messages and the rejected spans.
enum CodecEvent: Hashable, CustomStringConvertible {
    case message(TrackerMessage)
    case invalid(reason: String, close: Bool)

    var message: TrackerMessage? {
        if case .message(let m) = self { return m }
        return nil
    }

    var description: String {
        switch self {
        case .message(let m): "message(\(m))"
        case .invalid(let reason, let close): "invalid(\(reason)\(close ? ", close" : ""))"
        }
    }
}

/// Feeds bytes to a codec the way a connection does: append what arrived, decode until it
/// asks for more, drop what was consumed.
struct CodecRunner<Codec: TrackerCodec> {
    var codec: Codec
    var now: Timestamp
    private(set) var buffer: [UInt8] = []
    private(set) var events: [CodecEvent] = []
    /// Every `consumed` was at least 1 and at most what was buffered.
    private(set) var consumedWasSane = true
    /// An invalid frame asked to close: like a connection, the runner takes no more bytes.
    private(set) var closed = false

    init(_ codec: Codec, now: Timestamp = Timestamp(year: 2026, month: 3, day: 4, hour: 5, minute: 6, second: 7)) {
        self.codec = codec
        self.now = now
    }

    /// Appends `bytes` and decodes everything that is complete. Returns the new events.
    @discardableResult
    mutating func feed(_ bytes: some Sequence<UInt8>) -> [CodecEvent] {
        guard !closed else { return [] }
        buffer.append(contentsOf: bytes)
        let before = events.count
        // Every round consumes at least a byte, so a codec that does not cannot hang the test.
        var rounds = buffer.count + 1
        while !buffer.isEmpty, rounds > 0 {
            rounds -= 1
            let result = buffer.withUnsafeBytes { codec.decode($0, now: now) }
            let consumed: Int
            switch result {
            case .needMore:
                return Array(events[before...])
            case .message(let message, let n):
                events.append(.message(message))
                consumed = n
            case .invalid(let error, let n, let close):
                events.append(.invalid(reason: error.reason, close: close))
                consumed = n
                if close {
                    closed = true
                    return Array(events[before...])
                }
            }
            if consumed < 1 || consumed > buffer.count { consumedWasSane = false }
            buffer.removeFirst(min(max(consumed, 1), buffer.count))
        }
        return Array(events[before...])
    }

    /// Feeds `bytes` in chunks of the given sizes (cycled).
    mutating func feed(_ bytes: [UInt8], chunks: [Int]) {
        var index = 0, k = 0
        while index < bytes.count {
            let n = min(max(1, chunks[k % chunks.count]), bytes.count - index)
            feed(bytes[index..<(index + n)])
            index += n
            k += 1
        }
    }

    var messages: [TrackerMessage] { events.compactMap(\.message) }
}

extension TrackerMessage {
    var records: TrackerRecords? {
        if case .records(let r) = self { return r }
        return nil
    }

    var answer: [UInt8]? {
        switch self {
        case .identification(_, let accepted, _): accepted
        case .records(let r): r.answer
        case .control(_, _, let answer): answer
        case .admission: nil
        case .commandReply(_, _, _, let answer): answer
        }
    }

    /// The kind of a control, or of a command reply (which is answered as a control is).
    var controlKind: String? {
        switch self {
        case .control(let kind, _, _), .commandReply(let kind, _, _, _): kind
        default: nil
        }
    }
}

/// A short line per message for failure output (a position's full description is long).
func summary(_ message: TrackerMessage) -> String {
    switch message {
    case .identification(let id, _, _): return "identification(\(id))"
    case .control(let kind, let id, let answer): return "control(\(kind), \(id ?? "-"), \(hex(answer)))"
    case .admission(let a): return "admission(\(a.kind), \(a.deviceID), \(a.request))"
    case .commandReply(let kind, let id, let reply, _): return "commandReply(\(kind), \(id ?? "-"), \(hex(reply.reference)), \(reply.code.map(String.init) ?? "-"))"
    case .records(let r):
        let fixes = r.positions.map { "\($0.time.map(\.iso8601) ?? "-") \($0.latitude ?? .nan),\($0.longitude ?? .nan)" }
        return "records(\(r.deviceID ?? "-"), \(fixes), \(hex(r.answer)))"
    }
}

/// Nil when `a` and `b` are equal, else where they first differ (for `#expect(… == nil)`).
func firstDifference(_ a: [TrackerMessage], _ b: [TrackerMessage]) -> String? {
    for index in 0..<max(a.count, b.count) {
        let x = index < a.count ? a[index] : nil, y = index < b.count ? b[index] : nil
        if x != y {
            return "message \(index): \(x.map(summary) ?? "none") vs \(y.map(summary) ?? "none") (\(a.count) vs \(b.count) messages)"
        }
    }
    return nil
}

/// Hex for failure messages.
func hex(_ bytes: [UInt8]?) -> String {
    guard let bytes else { return "nil" }
    return bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

let limits = TrackerLimits(maxFrameBytes: 4096)
