import Synchronization

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
    }

    private let state = Mutex(State())

    public init() {}

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
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            let w: CheckedContinuation<Flags, Never>? = state.withLock { s in
                let w = s.waiter
                s.waiter = nil
                return w
            }
            w?.resume(returning: Flags())
        }
    }

    /// Waits for a post or until `timeout` passes (empty flags then).
    public func wait(timeout: Duration) async -> Flags {
        await withTaskGroup(of: Flags.self) { group in
            group.addTask { await self.wait() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return Flags()
            }
            var flags = await group.next() ?? Flags()
            group.cancelAll()
            // A post may have been taken by the waiting child just as the sleep ended: keep it.
            for await more in group { flags.merge(more) }
            return flags
        }
    }
}
