import GatewayCore
import Locking

/// The receiving half of a delivering sink: commits what arrives, then acknowledges upstream;
/// applies the queue caps; keeps the queue's stats.
///
/// A full disk does not fail the sink: the batch is held (upstream waits, nothing is lost) and
/// the commit is retried every second; it is reported as every write to the queue is
/// (``QueueWrites``: at once and every 10 s, `queue.disk_full`, `queue.write_failures`).
public struct OutboxWriter: Sendable {
    public let outbox: any Outbox
    public let mode: OutboxMode
    let context: ComponentContext
    /// How long to wait between commits while the disk is full.
    let retryInterval: Duration
    /// With a memory queue: what was received is acknowledged once it left the queue.
    private let deliveryMarks: DeliveryMarks?
    /// How every write of the sink to this queue meets a full disk.
    public let writes: QueueWrites

    public init(outbox: any Outbox, mode: OutboxMode, context: ComponentContext, retryInterval: Duration = .seconds(1)) {
        self.outbox = outbox
        self.mode = mode
        self.context = context
        self.retryInterval = retryInterval
        writes = QueueWrites(context: context)
        // A memory queue keeps nothing through a crash: upstream (a broker, a device waiting for
        // its answer) must hear "taken over" only once the position left it, delivered.
        if case .memory = mode, let memory = outbox as? MemoryOutbox {
            let marks = DeliveryMarks()
            memory.observeRemovals { marks.left(oldest: $0) }
            deliveryMarks = marks
        } else {
            deliveryMarks = nil
        }
        // Read at every stats line: a queue that only drains (a server that is down after a
        // replay at full speed) commits nothing more, yet its oldest record keeps ageing.
        context.stats.gauge("queue.depth") { outbox.depth }
        let clock = context.clock
        context.stats.gauge("queue.oldest_age_s") {
            outbox.oldestEnqueuedAt.map { max(0, Int((clock.now().milliseconds - $0) / 1000)) } ?? 0
        }
    }

    /// Commits `entries` (retrying while the disk is full), acknowledges `input`, applies the caps.
    /// Throws for faults retrying cannot fix, and `CancellationError` when cancelled while holding a batch.
    public func commit(_ entries: [OutboxEntry], acknowledging input: any SinkInput) async throws {
        var dropped = 0
        var failed = false
        while true {
            do {
                dropped = try await outbox.commit(entries, at: context.clock.now())
                break
            } catch let e as OutboxError where e.isDiskFull {
                failed = true
                writes.failed("commit", message: "\(e): cannot commit \(entries.count) position(s); holding them, upstream waits; retrying every \(DurationText.format(retryInterval))")
                try await context.clock.sleep(for: retryInterval)
            }
        }
        if let deliveryMarks, let memory = outbox as? MemoryOutbox {
            deliveryMarks.committed(through: memory.newestSeq, mark: input.received, input: input, oldest: memory.oldestSeq)
        } else {
            input.acknowledge()
        }
        if failed, let held = writes.succeeded("commit") {
            context.logger.warning("queue \(outbox.location): committing again after \(DurationText.format(held)) with a full disk")
        }
        if dropped > 0 { countDropped(dropped, reason: "queue.max_records") }
        try dropExpired()
    }

    /// Applies `queue.max_age`.
    public func dropExpired() throws {
        guard let maxAge = OutboxOptions.maxAge(mode) else { return }
        let now = context.clock.now()
        let n = try outbox.dropOlder(than: Timestamp(milliseconds: now.milliseconds - maxAge.milliseconds))
        if n > 0 { countDropped(n, reason: "queue.max_age") }
    }

    private func countDropped(_ n: Int, reason: String) {
        context.stats.addDropped(n)
        context.stats.count("queue.dropped", by: n)
        context.logger.warning("dropped the \(n) oldest queued position(s): \(reason) reached")
    }

    /// At the end of a run: says how many positions stay queued, and where, for the next start
    /// (a finite replay to a server that was down ends with them on disk, not lost).
    public func reportLeftOver() {
        let n = outbox.depth
        guard n > 0 else { return }
        if case .memory = mode {
            context.logger.warning("\(n) position(s) were still queued in memory and are lost (\"queue\": null)")
        } else {
            context.logger.warning("\(n) position(s) stay queued in \(outbox.location) for the next start")
        }
    }

    /// Moves records to the dead letters and counts them (`queue.dead_lettered`).
    public func deadLetter(_ records: [OutboxRecord], status: Int, answer: String) throws {
        try outbox.deadLetter(records, status: status, answer: answer, at: context.clock.now())
        context.stats.count("queue.dead_lettered", by: records.count)
    }
}

/// What a sink with a memory queue received, acknowledged upstream as it leaves the queue.
///
/// Each commit is a mark (what the sink had received) and the seq of its newest record; a mark is
/// acknowledged once no record up to that seq is left (delivered, dead-lettered, expired or
/// dropped over the cap: handled, either way).
final class DeliveryMarks: Sendable {
    private struct State {
        var pending: [(mark: SinkMark, through: Int64)] = []
        var input: (any SinkInput)?
    }

    private let state = Locked(State())

    func committed(through seq: Int64, mark: SinkMark, input: any SinkInput, oldest: Int64?) {
        state.withLock { s in
            s.input = input
            s.pending.append((mark, seq))
        }
        left(oldest: oldest)
    }

    /// Records left the queue; `oldest` is the oldest one still in it (nil: empty).
    func left(oldest: Int64?) {
        let (mark, input): (SinkMark?, (any SinkInput)?) = state.withLock { s in
            // Pending marks are in commit order: the ones whose records all left are a prefix.
            let done = s.pending.firstIndex { entry in oldest.map { entry.through >= $0 } ?? false } ?? s.pending.count
            guard done > 0 else { return (nil, nil) }
            let mark = s.pending[done - 1].mark
            s.pending.removeFirst(done)
            return (mark, s.input)
        }
        if let mark, let input { input.acknowledge(through: mark) }
    }
}
