import GatewayCore
import Testing
import TrackerProtocols

/// What a fixture vector must decode to: stated per vector in each codec's vector tests.
enum VectorExpectation: Sendable, CustomStringConvertible {
    /// The device names itself (login / IMEI frame).
    case identification(String)
    /// This many positions in one `.records` message.
    case positions(Int)
    /// No position: a `.control` of this kind.
    case control(String)
    /// A bad frame: `.invalid` with this reason, never a message, never an answer.
    case rejected(String)
    /// The "frame" is several whole frames, each a `.control` of this kind.
    case controls(String, count: Int)

    var description: String {
        switch self {
        case .identification(let id): "identification(\(id))"
        case .positions(let n): "positions(\(n))"
        case .control(let kind): "control(\(kind))"
        case .rejected(let reason): "rejected(\(reason))"
        case .controls(let kind, let count): "\(count) × control(\(kind))"
        }
    }
}

/// Checks helpers the vector suites share.
enum VectorCheck {
    /// `a` and `b` within `tolerance`, with a message naming the field.
    static func near(_ a: Double?, _ b: Double, _ tolerance: Double, _ what: String, _ id: String,
                     sourceLocation: SourceLocation = #_sourceLocation) {
        guard let a else {
            Issue.record("\(id): \(what) is nil, expected \(b)", sourceLocation: sourceLocation)
            return
        }
        #expect(abs(a - b) <= tolerance, "\(id): \(what) \(a) expected \(b)", sourceLocation: sourceLocation)
    }

    /// The first event of `events` is the rejection and nothing before it is a message.
    static func rejected(_ events: [CodecEvent], reason: String, _ id: String,
                         sourceLocation: SourceLocation = #_sourceLocation) {
        guard let first = events.first else {
            Issue.record("\(id): no result, expected invalid(\(reason))", sourceLocation: sourceLocation)
            return
        }
        #expect(first == .invalid(reason: reason, close: first.closes), "\(id): \(first), expected invalid(\(reason))",
                sourceLocation: sourceLocation)
    }
}

extension CodecEvent {
    var closes: Bool {
        if case .invalid(_, let close) = self { return close }
        return false
    }
}
