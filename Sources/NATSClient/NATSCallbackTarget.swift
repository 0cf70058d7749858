import GatewayCore
import Locking

/// What libnats' callbacks reach: found through a registry by an integer token (the C closure
/// pointer), so a callback that races the connection's deinit finds nothing instead of freed memory.
final class CallbackTarget: Sendable {
    private struct State {
        var pending: [UInt: @Sendable (NATSPublishResult) -> Void] = [:]
        var backoff: Backoff
        var connectWaiters: [CheckedContinuation<Void, Never>] = []
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        var closed = false
        var connected = false
        var everConnected = false
        /// Set by `close`: the disconnect that closing causes is not news.
        var closing = false
    }
    private let state: Locked<State>
    let events: @Sendable (NATSConnectionEvent) -> Void

    init(events: @escaping @Sendable (NATSConnectionEvent) -> Void, backoff: Backoff) {
        self.events = events
        state = Locked(State(backoff: backoff))
    }

    private static let registry = Locked<(next: Int, targets: [Int: CallbackTarget])>((1, [:]))

    static func register(_ t: CallbackTarget) -> Int {
        registry.withLock { r in
            let token = r.next
            r.next += 1
            r.targets[token] = t
            return token
        }
    }

    static func unregister(_ token: Int) { _ = registry.withLock { $0.targets.removeValue(forKey: token) } }

    static func find(_ closure: UnsafeMutableRawPointer?) -> CallbackTarget? {
        guard let closure else { return nil }
        let token = Int(bitPattern: closure)
        return registry.withLock { $0.targets[token] }
    }

    func register(_ key: UInt, _ completion: @escaping @Sendable (NATSPublishResult) -> Void) {
        state.withLock { $0.pending[key] = completion }
    }

    func unregister(_ key: UInt) { _ = state.withLock { $0.pending.removeValue(forKey: key) } }

    func complete(_ key: UInt, _ result: NATSPublishResult) {
        let c = state.withLock { $0.pending.removeValue(forKey: key) }
        c?(result)
    }

    func abandonPending(_ reason: String) {
        let all = state.withLock { s in
            defer { s.pending = [:] }
            return Array(s.pending.values)
        }
        for c in all { c(.abandoned(reason)) }
    }

    func markConnected(url: String) {
        let (waiters, first) = state.withLock { s in
            defer { s.connectWaiters = []; s.everConnected = true; s.connected = true }
            s.backoff.reset()
            return (s.connectWaiters, !s.everConnected)
        }
        events(first ? .connected(url: url) : .reconnected(url: url))
        for w in waiters { w.resume() }
    }

    /// Returns at the next connect, or soon when cancelled (the caller checks its condition again).
    func waitForConnect() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                // Checked under the lock that markConnected and the cancellation handler take, so
                // neither a connect nor a cancellation can slip between the check and the append.
                let now = state.withLock { s -> Bool in
                    if s.connected || Task.isCancelled { return true }
                    s.connectWaiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { s in
                defer { s.connectWaiters = [] }
                return s.connectWaiters
            }
            for w in waiters { w.resume() }
        }
    }

    func closing() { state.withLock { $0.closing = true } }

    func markDisconnected() { state.withLock { $0.connected = false } }

    func markClosed(lastError: String) {
        let (waiters, byUs) = state.withLock { s in
            defer { s.closeWaiters = []; s.closed = true; s.connected = false }
            return (s.closeWaiters, s.closing)
        }
        events(.closed(lastError: byUs ? "" : lastError))
        for w in waiters { w.resume() }
        // Waiters for a connect that will never come look again and see the connection closed.
        let connectWaiters = state.withLock { s in
            defer { s.connectWaiters = [] }
            return s.connectWaiters
        }
        for w in connectWaiters { w.resume() }
    }

    /// Returns when the connection closes, or soon when cancelled (the caller checks again).
    func waitForClose() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.closed || Task.isCancelled { return true }
                    s.closeWaiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { s in
                defer { s.closeWaiters = [] }
                return s.closeWaiters
            }
            for w in waiters { w.resume() }
        }
    }

    var isClosing: Bool { state.withLock { $0.closing } }

    func nextDelay() -> Duration { state.withLock { $0.backoff.next() } }
}
