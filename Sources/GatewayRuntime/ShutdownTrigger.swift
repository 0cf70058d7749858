import GatewayCore
import Locking

/// A one-shot event that tasks can wait for: shutdown was requested (a signal, a failed sink).
public final class ShutdownTrigger: Sendable {
    private struct State {
        var fired = false
        var reason: String?
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }
    private let state = Locked(State())

    public init() {}

    public var isFired: Bool { state.withLock { $0.fired } }
    public var reason: String? { state.withLock { $0.reason } }

    /// Fires once; later calls do nothing.
    public func fire(reason: String) {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { s in
            guard !s.fired else { return [] }
            s.fired = true
            s.reason = reason
            let w = Array(s.waiters.values)
            s.waiters.removeAll()
            return w
        }
        for w in waiters { w.resume() }
    }

    /// Returns when fired, or when the waiting task is cancelled.
    public func wait() async {
        let id: UInt64 = state.withLock { s in s.nextID += 1; return s.nextID }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.fired || Task.isCancelled { return true }
                    s.waiters[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let c = state.withLock { $0.waiters.removeValue(forKey: id) }
            c?.resume()
        }
    }
}

/// A sink buffer's stop request is a trigger the pipeline fires.
extension ShutdownTrigger: SinkStopRequest {}
