import GatewayCore
import Locking

/// A ``GatewayClock`` the test drives: time moves only when the test calls ``advance(by:)`` (wall
/// and monotonic time together), and sleepers and timers whose deadline is reached then wake.
///
/// Sleeping honours cancellation (throws `CancellationError`), like `Task.sleep`. A test that
/// moves time waits first for the code under test to wait on the clock (``waitForWaiters(_:timeout:)``),
/// so that what it waits for is measured from where the test expects.
public final class ManualClock: GatewayClock, Sendable {
    private struct Waiter {
        let id: Int
        let deadline: Duration
        let wake: Wake
    }
    private enum Wake {
        case sleeper(CheckedContinuation<Void, any Error>)
        case timer(ClockTimer, @Sendable () -> Void)
    }
    private struct State {
        /// Wall time at the origin of the monotonic timeline.
        let start: Int64
        var elapsed: Duration = .zero
        var nextID = 0
        var waiters: [Waiter] = []
        /// Ids cancelled before their continuation was registered.
        var cancelledEarly: Set<Int> = []
        /// Sleepers and timers ever registered (tests wait for a new one).
        var registered = 0

        var nowMilliseconds: Int64 { start + elapsed.milliseconds }

        mutating func takeDue() -> [Wake] {
            let due = waiters.filter { $0.deadline <= elapsed }.sorted { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
            waiters.removeAll { $0.deadline <= elapsed }
            return due.map(\.wake)
        }
    }
    private let state: Locked<State>

    /// Starts at `start` (default 2026-01-01T00:00:00Z); the monotonic timeline starts at zero.
    public init(start: Timestamp = Timestamp(year: 2026, month: 1, day: 1)) {
        state = Locked(State(start: start.milliseconds))
    }

    public func now() -> Timestamp { Timestamp(milliseconds: state.withLock { $0.nowMilliseconds }) }

    public func monotonicNow() -> MonotonicInstant { MonotonicInstant(sinceOrigin: state.withLock { $0.elapsed }) }

    /// How many tasks are sleeping on this clock.
    public var sleeperCount: Int {
        state.withLock { $0.waiters.count { if case .sleeper = $0.wake { true } else { false } } }
    }

    /// How many sleepers and timers wait on this clock.
    public var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// How many sleeps and timers were ever started on this clock: a test that saw `n` and
    /// waits for `n + 1` knows the code under test started a new wait.
    public var waitsStarted: Int { state.withLock { $0.registered } }

    /// The earliest deadline anything waits for, as time from now; nil when nothing waits.
    public var nextDeadline: Duration? {
        state.withLock { s in s.waiters.map(\.deadline).min().map { $0 - s.elapsed } }
    }

    public func sleep(until deadline: MonotonicInstant) async throws {
        try Task.checkCancellation()
        let id = state.withLock { s -> Int in s.nextID += 1; return s.nextID }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = state.withLock { s in
                    if s.cancelledEarly.remove(id) != nil { return .some(CancellationError()) }
                    if deadline.sinceOrigin <= s.elapsed { return .some(nil) }
                    s.waiters.append(Waiter(id: id, deadline: deadline.sinceOrigin, wake: .sleeper(c)))
                    s.registered += 1
                    return nil
                }
                switch resumeNow {
                case .some(.some(let e)): c.resume(throwing: e)
                case .some(.none): c.resume()
                case .none: break
                }
            }
        } onCancel: {
            let wake: Wake? = state.withLock { s in
                if let i = s.waiters.firstIndex(where: { $0.id == id }) { return s.waiters.remove(at: i).wake }
                s.cancelledEarly.insert(id)
                return nil
            }
            if case .sleeper(let c) = wake { c.resume(throwing: CancellationError()) }
        }
    }

    @discardableResult
    public func wake(at deadline: MonotonicInstant, _ action: @escaping @Sendable () -> Void) -> ClockTimer {
        let id = state.withLock { s -> Int in s.nextID += 1; return s.nextID }
        let timer = ClockTimer { [weak self] in self?.state.withLock { s in s.waiters.removeAll { $0.id == id } } }
        let now: Bool = state.withLock { s in
            s.registered += 1
            if deadline.sinceOrigin <= s.elapsed { return true }
            s.waiters.append(Waiter(id: id, deadline: deadline.sinceOrigin, wake: .timer(timer, action)))
            return false
        }
        if now { action() }
        return timer
    }

    /// Moves time forward and wakes every sleeper and timer whose time has come, earliest first.
    public func advance(by duration: Duration) {
        let due = state.withLock { s in
            s.elapsed += duration
            return s.takeDue()
        }
        // Woken outside the lock: a woken task or timer may call back into the clock at once.
        for wake in due {
            switch wake {
            case .sleeper(let c): c.resume()
            case .timer(let timer, let action): if !timer.isCancelled { action() }
            }
        }
    }

    /// Moves time to the earliest deadline anything waits for (and wakes it); false when nothing waits.
    @discardableResult
    public func advanceToNextDeadline() -> Bool {
        guard let next = nextDeadline else { return false }
        advance(by: max(.zero, next))
        return true
    }

    /// Waits (in real time, polling) until at least `count` sleepers and timers wait on the clock;
    /// false when that did not happen within `timeout`.
    public func waitForWaiters(_ count: Int = 1, timeout: Duration = .seconds(20)) async -> Bool {
        await Poll.until(timeout: timeout, interval: .milliseconds(1)) { self.waiterCount >= count }
    }

    /// Waits (in real time) until the code under test started a wait after `seen` (a value of
    /// ``waitsStarted`` read before): it is waiting again, so time can move.
    public func waitForNewWait(after seen: Int, timeout: Duration = .seconds(20)) async -> Bool {
        await Poll.until(timeout: timeout, interval: .milliseconds(1)) { self.waitsStarted > seen }
    }

    /// Moves time to `target` one deadline at a time, for code that loops on the clock beside
    /// real I/O (a source reading a peer): before each move it waits (in real time) until
    /// something waits on the clock, and after a move that woke it, until it waits again, so the
    /// code sees every deadline on its way. False when the code did not wait again within `timeout`.
    public func advance(to target: MonotonicInstant, timeout: Duration = .seconds(20)) async -> Bool {
        while monotonicNow() < target {
            guard await waitForWaiters(1, timeout: timeout) else { return false }
            let seen = waitsStarted
            let left = target - monotonicNow()
            guard let next = nextDeadline, next <= left else {
                advance(by: left)
                return true
            }
            advance(by: max(.zero, next))
            guard await waitForNewWait(after: seen, timeout: timeout) else { return false }
        }
        return true
    }

    /// Runs `body` while time jumps to each deadline as soon as anything waits on the clock, so
    /// nothing `body` starts waits in real time for the clock (backoffs, Retry-After, intervals).
    /// For tests where the order of the waits matters, not their length; a test that needs time
    /// to stand still while something happens moves it itself.
    public func fastForwarding<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    self.advanceToNextDeadline()
                    // Real time for what woke (and for the peers) to run before the next jump.
                    try? await Task.sleep(for: .milliseconds(1))
                }
                return nil
            }
            let result = try await body()
            group.cancelAll()
            return result
        }
    }
}
