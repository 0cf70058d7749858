import GatewayCore

/// The half of a batch sink that talks to the peer: builds one request from queued records and
/// sends it (an HTTP POST, a PostgreSQL transaction).
///
/// Implementation requirements:
/// - `encode` takes a prefix of `records` (at least one: a lone record over a size limit still
///   goes, it could never be sent otherwise) and is deterministic, so a batch re-read after a
///   restart is the same request.
/// - `send` answers with an ``OutboxBatchOutcome`` for whatever the peer did (a refused
///   connection is a `.retry`); it throws `CancellationError` when cancelled (the request is
///   abandoned at once), and other errors only for faults that end the sink.
/// - `start` runs once, in the delivering task, before the first batch (connect early, so a
///   refused login fails the sink at start); it throws only for faults that end the sink.
public protocol OutboxBatchTransport: Sendable {
    associatedtype Batch: Sendable
    func start() async throws
    func encode(_ records: [OutboxRecord]) throws -> (batch: Batch, count: Int)
    func send(_ batch: Batch, records: [OutboxRecord]) async throws -> OutboxBatchOutcome
}

// MARK: - Default implementations

extension OutboxBatchTransport {
    /// Nothing to prepare: the first request connects.
    public func start() async throws {}
}

/// A record of a batch the peer refused for good while it took the rest.
public struct OutboxRecordRefusal: Sendable {
    public var record: OutboxRecord
    public var status: Int
    public var answer: String

    public init(record: OutboxRecord, status: Int, answer: String) {
        self.record = record
        self.status = status
        self.answer = answer
    }
}

/// The peer's answer to one batch.
public enum OutboxBatchOutcome: Sendable {
    case accepted
    /// Taken except `refused` (records of the batch, each refused for good: PostgreSQL's check
    /// constraint on one row): those go to the dead letters, the rest is delivered.
    case acceptedExcept(refused: [OutboxRecordRefusal])
    /// Refused for good: the batch goes to the dead letters with the peer's status and answer.
    case rejected(status: Int, answer: String)
    /// Not delivered, may succeed later: sent again after a backoff (or `after`, when longer).
    case retry(reason: String, after: Duration?, status: Int, answer: String)
}

/// A batch read from the front of the queue, encoded.
public struct OutboxPreparedBatch<Batch: Sendable>: Sendable {
    public var records: [OutboxRecord]
    public var batch: Batch
    /// True when a count or size limit ended it (more may be queued), or it is the batch that was
    /// in flight at the last stop.
    public var isFull: Bool
}

/// The run loop of a batch sink: one task commits what arrives, another sends the oldest batch,
/// one request at a time.
///
///     SinkInput ──▶ receiver: commit (OutboxWriter), acknowledge ──▶ [queue] ──▶ sender: oldest batch first
///                      │ (count, bytes or interval reached)               ▲
///                      └─────────────────── OutboxSignal ─────────────────┘
///
/// - The receiver asks for a send when `maxRecords` / `maxBytes` are reached (full batches only)
///   or when `interval` has passed since the first unsent record (everything queued then).
/// - The sender deletes a batch only after the peer accepted it; retryable failures are retried
///   with backoff (or the peer's Retry-After) before anything newer is sent, so order holds; a
///   refused batch, or one that failed `retryMaxAttempts` times, goes to the dead letters.
/// - With `marksInFlight`, a batch that is not full is marked in the queue, durably, before it
///   goes: after a restart (a power cut included) the same records go again as one batch, so the
///   peer sees the same Idempotency-Key. A full batch needs no durable mark: it is the first
///   `maxRecords` records after the previous batch (or as many as `maxBytes` allows), and the
///   queue reads the same after a restart; its mark rides along with the delete behind it.
/// - With a durable queue, the delete of a delivered batch runs behind the requests
///   (``TrailingDelete``): the next batch is read after the delivered one and sent without
///   waiting for the queue's thread, which may be busy committing what arrives. A crash before
///   the delete sends those records again (same batches, same keys); nothing is lost.
/// - Every write to the queue waits out a full disk (``QueueWrites``); nothing is lost and the
///   sink does not fail.
/// - Returns when the input ended and the queue is empty, or, with a durable queue, at once when
///   the pipeline asks for a prompt stop (``OutboxHalves``); on cancellation throws
///   `CancellationError`. Either way what is left stays queued for the next start.
public struct OutboxBatchLoop: Sendable {
    public struct Options: Sendable {
        public var maxRecords: Int
        public var maxBytes: Int
        public var interval: Duration
        public var retryInitial: Duration
        public var retryMax: Duration
        /// 0: retry for as long as it takes.
        public var retryMaxAttempts: Int
        public var marksInFlight: Bool
        /// Prefix of the sink's counters (`<prefix>.sent`, `.requests`, `.retried`).
        public var statsPrefix: String
        /// How long to wait between attempts of a write that found the disk full.
        public var diskRetry: Duration
        /// Who refuses a record, in the log line of a dead-lettered one ("PostgreSQL").
        public var peer: String

        public init(maxRecords: Int, maxBytes: Int, interval: Duration, retryInitial: Duration, retryMax: Duration,
                    retryMaxAttempts: Int, marksInFlight: Bool, statsPrefix: String, diskRetry: Duration = .seconds(1),
                    peer: String = "the server") {
            self.maxRecords = maxRecords
            self.maxBytes = maxBytes
            self.interval = interval
            self.retryInitial = retryInitial
            self.retryMax = retryMax
            self.retryMaxAttempts = retryMaxAttempts
            self.marksInFlight = marksInFlight
            self.statsPrefix = statsPrefix
            self.diskRetry = diskRetry
            self.peer = peer
        }
    }

    public let writer: OutboxWriter
    public let options: Options
    public var outbox: any Outbox { writer.outbox }
    var context: ComponentContext { writer.context }

    public init(writer: OutboxWriter, options: Options) {
        self.writer = writer
        self.options = options
    }

    /// Runs until the input ended and the queue is empty. `encoder` is called once, in the
    /// receiving task: the encoder it returns may keep state from one position to the next.
    public func run<T: OutboxBatchTransport>(input: any SinkInput, transport: T,
                                             encoder: @escaping @Sendable () -> (Position) -> OutboxEntry) async throws {
        let signal = OutboxSignal(clock: context.clock)
        defer { writer.reportLeftOver() }
        if outbox.depth > 0 { context.logger.info("resuming with \(outbox.depth) queued position(s)") }
        try await OutboxHalves.run(input: input, writer: writer, receive: {
            try await receive(input: input, signal: signal, encode: encoder())
        }, deliver: {
            try await send(signal: signal, transport: transport)
        }, onFailure: {
            signal.post(ended: true, flushAll: true)
        })
    }

    // MARK: - Receiving

    private func receive(input: any SinkInput, signal: OutboxSignal, encode: (Position) -> OutboxEntry) async throws {
        var unflushedCount = 0
        var unflushedBytes = 0
        var firstUnflushed: MonotonicInstant?
        let clock = context.clock
        var records: [OutboxEntry] = []
        let durable = OutboxOptions.isDurable(writer.mode)
        func intervalFlush() {
            if unflushedCount > 0 || outbox.depth > 0 { signal.post(ended: false, flushAll: true) }
            unflushedCount = 0
            unflushedBytes = 0
            firstUnflushed = nil
        }
        while true {
            // A cancelled wait returns `.timeout` at once: without this check the loop would spin.
            try Task.checkCancellation()
            let wait = firstUnflushed.map { max(.milliseconds(1), options.interval - (clock.monotonicNow() - $0)) } ?? options.interval
            switch await input.next(timeout: wait) {
            case .positions(let batch):
                records.removeAll(keepingCapacity: true)
                func encodeBatch() {
                    for p in batch {
                        let entry = encode(p)
                        unflushedBytes += entry.payload.count + 1
                        records.append(entry)
                    }
                }
                if durable {
                    // Off the pipeline's thread, in this same task (nothing runs beside it): the
                    // encoding is the sink's work, not the sources' and transforms' (four
                    // transforms into a durable http sink, Benchmarks/nmea_replay.py: the
                    // pipeline's thread took 1.3x the CPU of the same replay into a file sink).
                    // A memory queue's stays there, as its delivering half does (OutboxHalves).
                    await withTaskExecutorPreference(globalConcurrentExecutor) { encodeBatch() }
                } else {
                    encodeBatch()
                }
                try await writer.commit(records, acknowledging: input)
                unflushedCount += batch.count
                if firstUnflushed == nil { firstUnflushed = clock.monotonicNow() }
                if unflushedCount >= options.maxRecords || unflushedBytes >= options.maxBytes {
                    signal.post(ended: false, flushAll: false)
                    unflushedCount %= options.maxRecords
                    unflushedBytes = 0
                    if unflushedCount == 0 { firstUnflushed = nil }
                }
                // A steady stream never lets `next` time out: the interval is checked here too.
                if let first = firstUnflushed, clock.monotonicNow() - first >= options.interval { intervalFlush() }
            case .timeout:
                intervalFlush()
                try await writer.writes.perform("drop expired positions", kind: "expiry", interval: options.diskRetry) {
                    try writer.dropExpired()
                }
            case .end:
                signal.post(ended: true, flushAll: true)
                return
            }
        }
    }

    // MARK: - Sending

    private func send<T: OutboxBatchTransport>(signal: OutboxSignal, transport: T) async throws {
        try await transport.start()
        // Records still to send before waiting for a full batch again: an interval flush (or a
        // restart) sends what was queued at that moment, not whatever arrives while it is sending —
        // otherwise every record arriving during a request would go out as its own partial batch.
        var flushRemaining = outbox.depth
        var ended = false
        func take(_ s: OutboxSignal.Flags) {
            ended = ended || s.ended
            if s.flushAll { flushRemaining = max(flushRemaining, outbox.depth) }
        }
        // The last seq the peer accepted: the next batch is read after it, whether or not its
        // delete has run. Deletes go through `trailing`, which knows how far they reached.
        var accepted: Int64 = 0
        let trailing = TrailingWrites(perform: settle)
        do {
            while true {
                try Task.checkCancellation()
                guard let batch = try prepareBatch(transport, after: accepted) else {
                    try await trailing.awaited(accepted: accepted, marking: nil, count: 0, durably: false)
                    if ended { return }
                    flushRemaining = 0
                    take(await signal.wait())
                    try Task.checkCancellation()
                    continue
                }
                if batch.isFull || flushRemaining > 0 || ended {
                    try await prepareToSend(batch, after: accepted, trailing: trailing)
                    if let seq = try await deliver(batch, transport: transport) { accepted = seq }
                    flushRemaining = max(0, flushRemaining - batch.records.count)
                    continue
                }
                try await trailing.awaited(accepted: accepted, marking: nil, count: 0, durably: false)
                take(await signal.wait())
                try Task.checkCancellation()
            }
        } catch {
            // Cancelled (a prompt stop) or failed: what was delivered leaves the queue now, or it
            // would go again after a restart. A delete running behind finishes first (a write on
            // the queue's thread runs even when its caller is cancelled; a wait out of a full disk
            // ends at the cancellation); one that failed gave its range back.
            trailing.cancel()
            await trailing.finish()
            if accepted > trailing.through {
                let seq = accepted
                try? await outbox.write { try outbox.remove(through: seq) }
            }
            throw error
        }
    }

    /// The writes before a batch goes. A batch that is not full, with `marksInFlight`, waits for
    /// its durable mark (with the delete of what was delivered before it, in one transaction):
    /// after a power cut the queue could be read into a different batch. Otherwise, on a durable
    /// queue, the delete of what was delivered (and this batch's mark, not synced) runs behind
    /// the request (``TrailingDelete``). On a memory queue the writes are done at once.
    private func prepareToSend<Batch>(_ batch: OutboxPreparedBatch<Batch>, after accepted: Int64, trailing: TrailingWrites) async throws {
        guard let last = batch.records.last?.seq else { return }
        let mark = options.marksInFlight ? last : nil
        let durably = mark != nil && !batch.isFull
        if OutboxOptions.isDurable(writer.mode) && !durably {
            try trailing.behind(accepted: accepted, marking: mark, count: batch.records.count)
        } else {
            try await trailing.awaited(accepted: accepted, marking: mark, count: batch.records.count, durably: durably)
        }
    }

    /// Performs one write of ``TrailingDelete``: deletes records up to `deleting` (delivered: the
    /// peer took them) and marks `marking` in flight, one transaction on the outbox's thread,
    /// synced when `durably`; a full disk is waited out (``QueueWrites``), since a delivered batch
    /// must not go again. `behind`: it runs behind the request (nobody waits for it).
    private func settle(_ write: TrailingDelete.Write, behind: Bool) async throws {
        let outbox = self.outbox, mark = write.marking, count = write.count
        let waits = behind ? "" : " (the request waits for it)"
        let what = switch (write.deleting, mark) {
        case (nil, _): "mark \(count) position(s) in flight" + waits
        case (_, nil): "delete delivered position(s)"
        default: "delete delivered position(s) and mark \(count) in flight" + waits
        }
        try await writer.writes.perform(what, kind: mark == nil ? "delete" : "in-flight mark", interval: options.diskRetry) {
            try await outbox.write {
                if let deleting = write.deleting {
                    try outbox.remove(through: deleting, markingInFlight: mark, durably: write.durably)
                } else if let mark {
                    try outbox.markInFlight(through: mark, durably: write.durably)
                }
            }
        }
    }

    /// The oldest records (with a seq above `after`: those up to it were delivered and wait for
    /// their delete) up to the count limit, as many as the transport puts in one batch; nil when
    /// there are none.
    public func prepareBatch<T: OutboxBatchTransport>(_ transport: T, after: Int64 = 0) throws -> OutboxPreparedBatch<T.Batch>? {
        var records = try outbox.records(after: after, limit: options.maxRecords)
        guard !records.isEmpty else { return nil }
        // A batch that was in flight when the process stopped goes again exactly as it was, so
        // its Idempotency-Key matches the request the peer may already have committed.
        let inFlight = options.marksInFlight ? outbox.inFlightThrough : nil
        var full = records.count >= options.maxRecords
        if let f = inFlight, records[0].seq <= f {
            records = records.filter { $0.seq <= f }
            full = true
        }
        let (batch, count) = try transport.encode(records)
        if count < records.count { full = true }
        return OutboxPreparedBatch(records: Array(records.prefix(max(1, count))), batch: batch, isFull: full)
    }

    /// Sends one batch until it is accepted or refused for good; retries keep it at the front.
    /// Returns the last seq of the batch when the peer took it, for the caller to delete (nil when
    /// it left the queue otherwise: refused, dead-lettered).
    private func deliver<T: OutboxBatchTransport>(_ prepared: OutboxPreparedBatch<T.Batch>, transport: T) async throws -> Int64? {
        guard let last = prepared.records.last else { return nil }
        let n = prepared.records.count
        let prefix = options.statsPrefix
        var backoff = Backoff(initial: options.retryInitial, cap: options.retryMax, multiplier: 2, jitter: 0.2)
        var attempt = 0
        while true {
            attempt += 1
            try Task.checkCancellation()
            switch try await transport.send(prepared.batch, records: prepared.records) {
            case .accepted:
                // Delivered: a full disk must not make it go again, so the delete (the caller's)
                // is what waits.
                context.stats.addEmitted(n)
                context.stats.count("\(prefix).sent", by: n)
                context.stats.count("\(prefix).requests")
                if attempt > 1 { context.logger.info("delivered \(n) position(s) after \(attempt) attempts") }
                return last.seq
            case .acceptedExcept(let refused):
                for r in refused {
                    try await writer.writes.perform("move a refused position to the dead letters", kind: "dead letters", interval: options.diskRetry) {
                        try await outbox.write { try writer.deadLetter([r.record], status: r.status, answer: r.answer) }
                    }
                    context.logger.error("\(options.peer) refused position \(r.record.id): \(r.answer); moved to dead letters")
                }
                context.stats.addEmitted(n - refused.count)
                context.stats.count("\(prefix).sent", by: n - refused.count)
                context.stats.count("\(prefix).requests")
                return last.seq
            case .rejected(let status, let answer):
                try await deadLetter(prepared.records, status: status, answer: answer)
                return nil
            case .retry(let reason, let retryAfter, let status, let answer):
                if options.retryMaxAttempts > 0 && attempt >= options.retryMaxAttempts {
                    context.logger.error("giving up after \(attempt) attempts: \(reason)")
                    try await deadLetter(prepared.records, status: status, answer: answer.isEmpty ? reason : answer)
                    return nil
                }
                var delay = backoff.next()
                if let retryAfter, retryAfter > delay { delay = retryAfter }
                context.stats.count("\(prefix).retried")
                let level: LogLevel = attempt == 1 || attempt % 10 == 0 ? .warning : .debug
                context.logger.log(level, "batch of \(n) not delivered (attempt \(attempt)): \(reason); \(outbox.depth) position(s) queued; retrying in \(DurationText.format(delay))")
                try await context.clock.sleep(for: delay)
            }
        }
    }

    private func deadLetter(_ records: [OutboxRecord], status: Int, answer: String) async throws {
        try await writer.writes.perform("move \(records.count) refused position(s) to the dead letters", kind: "dead letters", interval: options.diskRetry) {
            try await outbox.write { try writer.deadLetter(records, status: status, answer: answer) }
        }
        let first = records.first?.id ?? "", last = records.last?.id ?? ""
        context.logger.error("server rejected a batch of \(records.count) (ids \(first) … \(last)) with status \(status): \(answer); moved to dead letters")
    }
}
