import GatewayCore
import Locking

/// The bounded buffer in front of one sink, with a named overflow policy.
///
/// - `block`: a sender waits while the buffer is full (backpressure); nothing is lost.
/// - `drop_oldest`: the oldest buffered positions are dropped and counted; the newest fix wins.
///
/// In `durable` mode a sender also waits until the sink acknowledged that what it received is
/// persisted, so a position counts as accepted only once it is on disk.
public final class SinkBuffer: SinkInput, Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var batches: [[Position]] = []
        var head = 0
        var count = 0
        var closed = false
        var consumer: (id: UInt64, continuation: CheckedContinuation<SinkEvent, Never>)?
        var spaceWaiters: [Waiter] = []
        var ackWaiters: [(seq: UInt64, waiter: Waiter)] = []
        /// Acknowledgements of batches (by their enqueue seq), released when the sink acknowledges them.
        var acknowledgements: [(seq: UInt64, ack: BatchAcknowledgement)] = []
        var enqueuedSeq: UInt64 = 0
        var deliveredSeq: UInt64 = 0
        var acknowledgedSeq: UInt64 = 0
        var nextID: UInt64 = 0

        mutating func takeAll() -> [Position] {
            var out: [Position]
            if batches.count - head == 1 {
                out = batches[head]
            } else {
                out = []
                out.reserveCapacity(count)
                for i in head..<batches.count { out.append(contentsOf: batches[i]) }
            }
            batches.removeAll(keepingCapacity: true)
            head = 0
            count = 0
            deliveredSeq = enqueuedSeq
            return out
        }
    }

    public let capacity: Int
    public let policy: PipelineConfiguration.BufferSettings.WhenFull
    public let durable: Bool
    private let stats: ComponentStats
    /// Ends ``next(timeout:)``'s waits.
    private let clock: any GatewayClock
    private let state = Locked(State())
    /// Fired by the pipeline on a signal or a failure: see ``SinkInput/stopRequest``.
    public let stopNow = ShutdownTrigger()
    public var stopRequest: (any SinkStopRequest)? { stopNow }

    public init(capacity: Int, policy: PipelineConfiguration.BufferSettings.WhenFull, durable: Bool, stats: ComponentStats,
                clock: any GatewayClock = .system) {
        self.clock = clock
        self.capacity = max(1, capacity)
        self.policy = policy
        self.durable = durable
        self.stats = stats
    }

    /// Positions waiting in the buffer.
    public var depth: Int { state.withLock { $0.count } }

    /// Positions waiting, and a count that grows each time the sink takes from the buffer: two
    /// samples with positions waiting and the same count mean the sink took nothing in between.
    var progressMark: (waiting: Int, taken: UInt64) { state.withLock { ($0.count, $0.deliveredSeq) } }

    // MARK: - Producer side

    /// Adds a batch; see the type's policies for when this waits.
    ///
    /// With an `acknowledgement`, the buffer retains it until the sink acknowledged the batch, and
    /// does not wait for that here even in durable mode: the source bounds what is outstanding.
    /// A batch dropped because the buffer is closed never releases it (it was not handled).
    public func send(_ batch: [Position], acknowledgement: BatchAcknowledgement? = nil) async {
        guard !batch.isEmpty else { return }
        stats.addReceived(batch.count)
        var waitedForSpace = false
        while true {
            enum Step {
                case enqueued(UInt64, [CheckedContinuation<Void, Never>], handOver: (CheckedContinuation<SinkEvent, Never>, [Position])?)
                case wait(UInt64), dropped(String)
            }
            let step: Step = state.withLock { s in
                if s.closed { return .dropped("dropped.closed") }
                let full = s.count > 0 && s.count + batch.count > capacity
                // A cancelled sender may overshoot once, but a source that keeps sending after
                // cancellation must not grow the buffer without bound.
                if full && waitedForSpace && s.count >= 2 * capacity { return .dropped("dropped.after_cancel") }
                if full && policy == .block && !waitedForSpace {
                    s.nextID += 1
                    return .wait(s.nextID)
                }
                // Space, or drop_oldest, or a cancelled wait: enqueue (cancellation never loses a batch).
                s.batches.append(batch)
                s.count += batch.count
                s.enqueuedSeq += 1
                if let acknowledgement {
                    acknowledgement.retain()
                    s.acknowledgements.append((s.enqueuedSeq, acknowledgement))
                }
                if policy == .dropOldest { dropOverflow(&s) }
                var freed: [CheckedContinuation<Void, Never>] = []
                var handOver: (CheckedContinuation<SinkEvent, Never>, [Position])?
                if let c = s.consumer {
                    s.consumer = nil
                    handOver = (c.continuation, s.takeAll())
                    freed = s.spaceWaiters.map(\.continuation)
                    s.spaceWaiters.removeAll()
                }
                return .enqueued(s.enqueuedSeq, freed, handOver: handOver)
            }
            switch step {
            case .dropped(let reason):
                stats.addDropped(batch.count)
                stats.count(reason, by: batch.count)
                return
            case .enqueued(let seq, let freed, let handOver):
                // Resumed outside the lock: resuming takes the consumer task's status lock, which
                // its cancellation handler holds while it waits for this lock (a deadlock seen
                // when an http sink's timed wait was cancelled as a batch arrived).
                if let (c, all) = handOver { c.resume(returning: .positions(all)) }
                for w in freed { w.resume() }
                if durable && acknowledgement == nil { await waitForAcknowledgement(seq) }
                return
            case .wait(let id):
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.withLock { s -> Bool in
                            // The same test as "full" above: when the sink emptied the buffer in between, a
                            // batch larger than the capacity must go in, or nobody would ever wake us.
                            if s.closed || Task.isCancelled || s.count == 0 || s.count + batch.count <= capacity { return true }
                            s.spaceWaiters.append(Waiter(id: id, continuation: c))
                            return false
                        }
                        if resumeNow { c.resume() }
                    }
                } onCancel: {
                    resumeWaiter(id)
                }
                // After one wait the batch goes in even if still full: a cancelled sender must not lose it,
                // and the buffer overshoots by at most one batch per sender.
                waitedForSpace = Task.isCancelled
            }
        }
    }

    /// Adds a batch without waiting for space or acknowledgement (shutdown flushes of held positions).
    public func enqueueWithoutWaiting(_ batch: [Position]) {
        guard !batch.isEmpty else { return }
        stats.addReceived(batch.count)
        var closed = false
        let (consumer, all): (CheckedContinuation<SinkEvent, Never>?, [Position]) = state.withLock { s in
            guard !s.closed else { closed = true; return (nil, []) }
            s.batches.append(batch)
            s.count += batch.count
            s.enqueuedSeq += 1
            if policy == .dropOldest { dropOverflow(&s) }
            guard let c = s.consumer else { return (nil, []) }
            s.consumer = nil
            return (c.continuation, s.takeAll())
        }
        if closed {
            stats.addDropped(batch.count)
            stats.count("dropped.closed", by: batch.count)
        }
        consumer?.resume(returning: .positions(all))
    }

    private func dropOverflow(_ s: inout State) {
        var dropped = 0
        while s.count > capacity, s.head < s.batches.count {
            let excess = s.count - capacity
            let first = s.batches[s.head].count
            if first <= excess {
                s.count -= first
                dropped += first
                s.batches[s.head] = []
                s.head += 1
            } else {
                s.batches[s.head].removeFirst(excess)
                s.count -= excess
                dropped += excess
            }
        }
        if dropped > 0 {
            stats.addDropped(dropped)
            stats.count("dropped.buffer_full", by: dropped)
        }
    }

    private func waitForAcknowledgement(_ seq: UInt64) async {
        let id: UInt64 = state.withLock { s in s.nextID += 1; return s.nextID }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.closed || Task.isCancelled || s.acknowledgedSeq >= seq { return true }
                    s.ackWaiters.append((seq, Waiter(id: id, continuation: c)))
                    return false
                }
                if resumeNow { c.resume() }
            }
        } onCancel: {
            resumeWaiter(id)
        }
    }

    private func resumeWaiter(_ id: UInt64) {
        let c: CheckedContinuation<Void, Never>? = state.withLock { s in
            if let i = s.spaceWaiters.firstIndex(where: { $0.id == id }) { return s.spaceWaiters.remove(at: i).continuation }
            if let i = s.ackWaiters.firstIndex(where: { $0.waiter.id == id }) { return s.ackWaiters.remove(at: i).waiter.continuation }
            return nil
        }
        c?.resume()
    }

    /// Ends the stream: the sink drains what is buffered, then reads `.end`; later sends are dropped.
    public func close() {
        let (consumer, waiters): (CheckedContinuation<SinkEvent, Never>?, [CheckedContinuation<Void, Never>]) = state.withLock { s in
            s.closed = true
            var consumer: CheckedContinuation<SinkEvent, Never>?
            if s.count == 0, let c = s.consumer {
                consumer = c.continuation
                s.consumer = nil
            }
            let waiters = s.spaceWaiters.map(\.continuation) + s.ackWaiters.map(\.waiter.continuation)
            s.spaceWaiters.removeAll()
            s.ackWaiters.removeAll()
            return (consumer, waiters)
        }
        consumer?.resume(returning: .end)
        for w in waiters { w.resume() }
    }

    // MARK: - Consumer side

    public func next(timeout: Duration?) async -> SinkEvent {
        if let ready = takeIfReady() { return ready }
        guard let timeout else {
            let event = await waitForData()
            if case .timeout = event { return .end }  // only a cancelled wait ends this way
            return event
        }
        return await withTaskGroup(of: SinkEvent?.self) { group in
            group.addTask { await self.waitForData() }
            group.addTask {
                try? await self.clock.sleep(for: timeout)
                return nil
            }
            var result: SinkEvent = .timeout
            var first = true
            for await r in group {
                if first { group.cancelAll(); first = false }
                if let r, case .positions = r { result = r } else if let r, case .end = r, case .timeout = result { result = r }
            }
            return result
        }
    }

    public func acknowledge() { acknowledge(upTo: nil) }

    public var received: SinkMark { SinkMark(state.withLock { $0.deliveredSeq }) }

    public func acknowledge(through mark: SinkMark) { acknowledge(upTo: mark.value) }

    /// Acknowledges what was delivered to the sink, up to `seq` when given.
    private func acknowledge(upTo seq: UInt64?) {
        let (waiters, acks): ([CheckedContinuation<Void, Never>], [BatchAcknowledgement]) = state.withLock { s in
            s.acknowledgedSeq = max(s.acknowledgedSeq, min(seq ?? s.deliveredSeq, s.deliveredSeq))
            let ready = s.ackWaiters.filter { $0.seq <= s.acknowledgedSeq }
            s.ackWaiters.removeAll { $0.seq <= s.acknowledgedSeq }
            // Enqueued in seq order: the handled ones are a prefix.
            let n = s.acknowledgements.firstIndex { $0.seq > s.acknowledgedSeq } ?? s.acknowledgements.count
            let acks = s.acknowledgements.prefix(n).map(\.ack)
            s.acknowledgements.removeFirst(n)
            return (ready.map(\.waiter.continuation), acks)
        }
        for w in waiters { w.resume() }
        // Outside the lock: a source's closure may do I/O (acking a broker).
        for a in acks { a.release() }
    }

    private func takeIfReady() -> SinkEvent? {
        let (event, waiters): (SinkEvent?, [CheckedContinuation<Void, Never>]) = state.withLock { s in
            if s.count > 0 {
                let all = s.takeAll()
                let w = s.spaceWaiters.map(\.continuation)
                s.spaceWaiters.removeAll()
                return (.positions(all), w)
            }
            return (s.closed ? .end : nil, [])
        }
        for w in waiters { w.resume() }
        return event
    }

    /// Waits for data or the end; a cancelled wait returns `.timeout`.
    private func waitForData() async -> SinkEvent {
        let id: UInt64 = state.withLock { s in s.nextID += 1; return s.nextID }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<SinkEvent, Never>) in
                let (immediate, waiters): (SinkEvent?, [CheckedContinuation<Void, Never>]) = state.withLock { s in
                    if s.count > 0 {
                        let all = s.takeAll()
                        let w = s.spaceWaiters.map(\.continuation)
                        s.spaceWaiters.removeAll()
                        return (.positions(all), w)
                    }
                    if s.closed { return (.end, []) }
                    if Task.isCancelled { return (.timeout, []) }
                    s.consumer = (id, c)
                    return (nil, [])
                }
                for w in waiters { w.resume() }
                if let immediate { c.resume(returning: immediate) }
            }
        } onCancel: {
            let c: CheckedContinuation<SinkEvent, Never>? = state.withLock { s in
                guard let consumer = s.consumer, consumer.id == id else { return nil }
                s.consumer = nil
                return consumer.continuation
            }
            c?.resume(returning: .timeout)
        }
    }
}
