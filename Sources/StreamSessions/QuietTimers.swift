import GatewayCore

/// When a streaming source's read loop must wake without input, and what is due when it does:
/// the epoch in progress is flushed once the input was quiet for `idleFlush`, the session counts
/// as stalled once it was quiet for `stallTimeout`, and the source's own timers (receiver health,
/// duty-cycle windows) are looked at every `tick`. Times are the component clock's monotonic ones.
///
/// A wait may end early (input on another descriptor, a spurious wakeup): nothing is due before
/// its time, so the loop asks again.
public struct QuietTimers: Sendable {
    /// Quiet for this long, the pending epoch is emitted.
    public let idleFlush: Duration
    /// Quiet for this long, the session is dead; nil: no stall watchdog.
    public let stallTimeout: Duration?
    /// The source's own timers are looked at least this often; nil: it has none.
    public var tick: Duration?
    /// The longest wait when nothing is due.
    public let idleWait: Duration
    /// When the last input arrived (or the session began).
    public private(set) var lastInput: MonotonicInstant
    /// Input arrived since the last flush.
    public private(set) var pending = false

    public init(idleFlush: Duration, stallTimeout: Duration?, tick: Duration? = nil, idleWait: Duration = .seconds(60),
                now: MonotonicInstant) {
        self.idleFlush = idleFlush
        self.stallTimeout = stallTimeout
        self.tick = tick
        self.idleWait = idleWait
        lastInput = now
    }

    /// Input arrived at `now`.
    public mutating func received(at now: MonotonicInstant) {
        lastInput = now
        pending = true
    }

    /// Quiet counts from `now` again (a receiver woken, a watch resumed), without pending input.
    public mutating func restart(at now: MonotonicInstant) {
        lastInput = now
    }

    /// The pending input was emitted by other means (the end of a window, of a session).
    public mutating func flushed() { pending = false }

    /// How long the next wait for input may last: until the idle flush or the stall is due (the
    /// stall only while `watchingStall`), and at most a tick.
    public func wait(at now: MonotonicInstant, watchingStall: Bool = true) -> Duration {
        var due: MonotonicInstant?
        if pending { due = lastInput + idleFlush }
        if watchingStall, let stallTimeout {
            let stall = lastInput + stallTimeout
            due = due.map { min($0, stall) } ?? stall
        }
        var wait = due.map { max(.zero, $0 - now) } ?? idleWait
        if let tick { wait = min(wait, tick) }
        return wait
    }

    /// True once the pending input has been quiet for `idleFlush` (it is then no longer pending):
    /// the caller flushes its epoch in progress.
    public mutating func takeIdleFlush(at now: MonotonicInstant) -> Bool {
        guard pending, now - lastInput >= idleFlush else { return false }
        pending = false
        return true
    }

    /// Quiet for `stallTimeout` or longer.
    public func isStalled(at now: MonotonicInstant) -> Bool {
        guard let stallTimeout else { return false }
        return now - lastInput >= stallTimeout
    }
}
