import GatewayCore

/// The times one connection keeps: when the stream counts as stalled, and when GGA is due.
///
/// A state machine without I/O on the client's injected clock, so stall and GGA timing are
/// tested to the millisecond. GGA keeps its cadence (due times step by the interval, a late
/// check does not shift the next) and is sent only once the receiver has a fix.
public struct NTRIPSessionTimer: Sendable {
    public enum Action: Sendable, Equatable {
        case sendGGA
        /// No byte for the stall timeout.
        case stalled
        /// Nothing due before this instant.
        case wait(until: Timestamp)
    }

    public let stallTimeout: Duration
    public let ggaInterval: Duration
    public let sendsGGA: Bool
    public private(set) var lastByte: Timestamp
    /// When the next GGA is due; nil until the first is sent.
    public private(set) var nextGGA: Timestamp?

    public init(start: Timestamp, stallTimeout: Duration, ggaInterval: Duration, sendsGGA: Bool) {
        self.stallTimeout = stallTimeout
        self.ggaInterval = ggaInterval
        self.sendsGGA = sendsGGA
        lastByte = start
    }

    public mutating func bytesArrived(at now: Timestamp) { lastByte = now }

    public mutating func ggaSent(at now: Timestamp) {
        let step = ggaInterval.milliseconds
        if let due = nextGGA, now.milliseconds - due.milliseconds < step {
            nextGGA = Timestamp(milliseconds: due.milliseconds + step)
        } else {
            nextGGA = Timestamp(milliseconds: now.milliseconds + step)
        }
    }

    /// What is due at `now`; `haveFix`: the receiver has a position to send.
    public func next(now: Timestamp, haveFix: Bool) -> Action {
        let stallAt = lastByte.milliseconds + stallTimeout.milliseconds
        if now.milliseconds >= stallAt { return .stalled }
        if sendsGGA && haveFix && (nextGGA.map { now >= $0 } ?? true) { return .sendGGA }
        var until = stallAt
        if sendsGGA, haveFix, let due = nextGGA { until = min(until, due.milliseconds) }
        return .wait(until: Timestamp(milliseconds: until))
    }
}
