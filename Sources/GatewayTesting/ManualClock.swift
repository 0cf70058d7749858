import GatewayCore
import Locking

/// A ``GatewayClock`` the test drives: `now()` moves only when the test calls ``advance(by:)``,
/// and sleepers wake when the time they wait for is reached.
///
/// Sleeping honours cancellation (throws `CancellationError`), like `Task.sleep`.
public final class ManualClock: GatewayClock, Sendable {
    private struct Sleeper {
        let id: Int
        let deadline: Int64
        let continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var now: Int64
        var nextID = 0
        var sleepers: [Sleeper] = []
        /// Ids cancelled before their continuation was registered.
        var cancelledEarly: Set<Int> = []
    }
    private let state: Locked<State>

    /// Starts at `start` (default 2026-01-01T00:00:00Z).
    public init(start: Timestamp = Timestamp(year: 2026, month: 1, day: 1)) {
        state = Locked(State(now: start.milliseconds))
    }

    public func now() -> Timestamp { Timestamp(milliseconds: state.withLock { $0.now }) }

    /// How many tasks are sleeping on this clock (wait for it before advancing).
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        let id = state.withLock { s -> Int in s.nextID += 1; return s.nextID }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = state.withLock { s in
                    if s.cancelledEarly.remove(id) != nil { return .some(CancellationError()) }
                    let deadline = s.now + duration.milliseconds
                    if deadline <= s.now { return .some(nil) }
                    s.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: c))
                    return nil
                }
                switch resumeNow {
                case .some(.some(let e)): c.resume(throwing: e)
                case .some(.none): c.resume()
                case .none: break
                }
            }
        } onCancel: {
            let c: CheckedContinuation<Void, any Error>? = state.withLock { s in
                if let i = s.sleepers.firstIndex(where: { $0.id == id }) { return s.sleepers.remove(at: i).continuation }
                s.cancelledEarly.insert(id)
                return nil
            }
            c?.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose time has come.
    public func advance(by duration: Duration) {
        let due: [CheckedContinuation<Void, any Error>] = state.withLock { s in
            s.now += duration.milliseconds
            let now = s.now
            let ready = s.sleepers.filter { $0.deadline <= now }
            s.sleepers.removeAll { $0.deadline <= now }
            return ready.map(\.continuation)
        }
        // Resumed outside the lock: a woken task may call back into the clock at once.
        for c in due { c.resume() }
    }
}
