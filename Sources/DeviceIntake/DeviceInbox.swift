import GatewayCore
import Locking

/// Positions a listening source decoded on the I/O thread, waiting for its task to emit them.
///
/// Each delivery carries what must happen once its positions are handled end to end (the
/// device's answer). The source's task takes everything waiting at once and emits it as one
/// batch, so a burst from many devices costs one trip through the pipeline, not one per frame.
/// The inbox is bounded by its producers: past ``softLimit`` positions they stop reading
/// (TCP back-pressure) or drop datagrams (which their devices resend), until ``take()`` drains it.
public final class DeviceInbox: Sendable {
    /// Positions of one frame (or request) and what to do once they are handled.
    public struct Delivery: Sendable {
        public var positions: [Position]
        /// Runs once every position was handled; on whichever thread completed the batch.
        public var handled: @Sendable () -> Void

        public init(positions: [Position], handled: @escaping @Sendable () -> Void) {
            self.positions = positions
            self.handled = handled
        }
    }

    private struct State {
        var deliveries: [Delivery] = []
        var positions = 0
        var waiter: CheckedContinuation<[Delivery]?, Never>?
        var closed = false
    }

    /// Past this many waiting positions, producers hold back.
    public let softLimit: Int
    private let state = Locked(State())

    public init(softLimit: Int = 10_000) { self.softLimit = softLimit }

    /// Positions waiting.
    public var waitingPositions: Int { state.withLock { $0.positions } }

    /// Adds a delivery; returns false (and keeps nothing) once the inbox was closed. Callable
    /// from any thread.
    @discardableResult
    public func put(_ delivery: Delivery) -> Bool {
        let resume: (CheckedContinuation<[Delivery]?, Never>, [Delivery])? = state.withLock { s in
            guard !s.closed else { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return (waiter, [delivery])
            }
            s.deliveries.append(delivery)
            s.positions += delivery.positions.count
            return nil
        }
        if let (waiter, deliveries) = resume {
            waiter.resume(returning: deliveries)
            return true
        }
        return state.withLock { !$0.closed }
    }

    /// True when producers should hold back.
    public var isFull: Bool { state.withLock { $0.positions >= softLimit } }

    /// Everything waiting, after waiting for at least one delivery; nil once closed or cancelled.
    /// One taker at a time.
    public func take() async -> [Delivery]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<[Delivery]?, Never>) in
                let now: [Delivery]?? = state.withLock { s in
                    if s.closed || Task.isCancelled { return .some(nil) }
                    if !s.deliveries.isEmpty {
                        let taken = s.deliveries
                        s.deliveries.removeAll(keepingCapacity: true)
                        s.positions = 0
                        return .some(taken)
                    }
                    s.waiter = c
                    return .none
                }
                if let now { c.resume(returning: now) }
            }
        } onCancel: {
            close()
        }
    }

    /// Emits what arrives until the inbox is closed or the task cancelled: everything waiting at
    /// once as one batch, whose acknowledgement runs each delivery's `handled`; `taken` runs
    /// after each batch was handed to the pipeline (producers held back may go on).
    public func pump(into output: SourceOutput, taken: @Sendable () -> Void = {}) async {
        while let deliveries = await take() {
            var batch: [Position] = []
            batch.reserveCapacity(deliveries.reduce(0) { $0 + $1.positions.count })
            for d in deliveries { batch.append(contentsOf: d.positions) }
            let completions = deliveries.map(\.handled)
            await output.emit(batch) {
                for completion in completions { completion() }
            }
            taken()
        }
    }

    /// Ends the inbox: a waiting ``take()`` returns nil, later deliveries are refused, and what
    /// was waiting is dropped (never handled: its devices get no answer and resend).
    public func close() {
        let waiter = state.withLock { s -> CheckedContinuation<[Delivery]?, Never>? in
            s.closed = true
            s.deliveries.removeAll()
            s.positions = 0
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }
}
