import GatewayCore
import Locking

/// Wakes a sink's delivering task: flags accumulate until it reads them.
public final class OutboxSignal: Sendable {
    public struct Flags: Sendable {
        /// The input ended: deliver what is queued and stop.
        public var ended = false
        /// Send everything queued now, not only full batches.
        public var flushAll = false

        public init(ended: Bool = false, flushAll: Bool = false) {
            self.ended = ended
            self.flushAll = flushAll
        }

        mutating func merge(_ other: Flags) {
            ended = ended || other.ended
            flushAll = flushAll || other.flushAll
        }
    }

    private struct State {
        var flags = Flags()
        var posted = false
        var waiter: CheckedContinuation<Flags, Never>?
        /// Numbers the timed waits, so a timer that fires late cannot end a later wait.
        var ticket: UInt64 = 0
    }

    private let state = Locked(State())
    /// Ends timed waits.
    private let clock: any GatewayClock

    public init(clock: any GatewayClock) { self.clock = clock }

    public func post(ended: Bool = false, flushAll: Bool = false) {
        let resume: (CheckedContinuation<Flags, Never>, Flags)? = state.withLock { s in
            s.flags.merge(Flags(ended: ended, flushAll: flushAll))
            s.posted = true
            guard let w = s.waiter else { return nil }
            s.waiter = nil
            let f = s.flags
            s.flags = Flags()
            s.posted = false
            return (w, f)
        }
        if let (w, f) = resume { w.resume(returning: f) }
    }

    /// Waits for a post (returns at once if one came since the last wait); cancellation returns empty flags.
    public func wait() async -> Flags {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Flags, Never>) in
                let ready: Flags? = state.withLock { s in
                    if s.posted || Task.isCancelled {
                        let f = s.flags
                        s.flags = Flags()
                        s.posted = false
                        return f
                    }
                    s.waiter = c
                    s.ticket &+= 1
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            resumeWaiter()
        }
    }

    /// Waits for a post or until `timeout` passes on the clock (empty flags then).
    ///
    /// A delivering loop waits here once per wake-up, thousands of times a second under load: a
    /// clock timer (``GatewayClock/wake(at:_:)``, a Dispatch timer on the system clock) ends the
    /// wait, not a task group with a sleeping child (two tasks and a cancellation per wake-up).
    public func wait(timeout: Duration) async -> Flags {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Flags, Never>) in
                let ticket: UInt64? = state.withLock { s in
                    if s.posted || Task.isCancelled { return nil }
                    s.waiter = c
                    s.ticket &+= 1
                    return s.ticket
                }
                guard let ticket else { return c.resume(returning: take()) }
                clock.wake(at: clock.monotonicNow() + timeout) { [self] in expire(ticket) }
            }
        } onCancel: {
            resumeWaiter()
        }
    }

    /// Whether a task waits here (tests).
    var isWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// Whether a post is waiting to be taken (tests).
    var hasPost: Bool { state.withLock { $0.posted } }

    /// Forgets a post not taken yet (tests).
    func clear() { _ = take() }

    /// Flags posted so far, cleared.
    private func take() -> Flags {
        state.withLock { s in
            let f = s.flags
            s.flags = Flags()
            s.posted = false
            return f
        }
    }

    /// Ends the wait `ticket` with empty flags, unless a post (or a later wait) came first.
    private func expire(_ ticket: UInt64) {
        let w: CheckedContinuation<Flags, Never>? = state.withLock { s in
            guard s.ticket == ticket, let w = s.waiter else { return nil }
            s.waiter = nil
            return w
        }
        w?.resume(returning: Flags())
    }

    private func resumeWaiter() {
        let w: CheckedContinuation<Flags, Never>? = state.withLock { s in
            let w = s.waiter
            s.waiter = nil
            return w
        }
        w?.resume(returning: Flags())
    }
}
