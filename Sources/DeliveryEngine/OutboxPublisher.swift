import GatewayCore

/// The delivering half of a broker sink (``OutboxSinkLoop``): publishes queued records, at most
/// `window` unacknowledged, settles the broker's acks, and deletes what was accepted. Used by
/// the delivering task alone; acks and finished deletes arrive through ``AckInbox`` and
/// ``DeleteInbox`` from other threads, each followed by a post to the signal.
///
/// One pass of ``run()``: settle the acks, take the finished delete, start the next, move
/// refused records to the dead letters, publish (failed records first, then fresh ones), then
/// wait for the signal, a pause's end or the next expiry check.
struct OutboxPublisher {
    /// Records handed to the transport and not settled, and records to send again.
    private struct Window {
        /// The last seq read from the queue and handed over (fresh records are read after it).
        var sentThrough: Int64 = 0
        var inFlight: [Int64: OutboxRecord] = [:]
        /// Records the broker did not take (`.retry`), oldest first: sent again before fresh ones.
        var resend: [OutboxRecord] = []
        /// Refused for good, waiting for their move to the dead letters.
        var rejected: [(OutboxRecord, String)] = []

        var isEmpty: Bool { inFlight.isEmpty && resend.isEmpty && rejected.isEmpty }
    }

    /// Acknowledged rows not deleted yet. Deletes run on the outbox's own thread, one at a time,
    /// while publishing goes on: each takes every ack that arrived during the previous one (one
    /// transaction, one fsync, for many acks; a broker acknowledges far faster than a commit per
    /// ack could keep up with). A crash before the delete only re-sends those messages
    /// (at-least-once; message ids dedupe).
    private struct Deletes {
        var waiting: [Int64] = []
        var running = false
        /// While the disk is full, the next delete waits until then after a failed one.
        var pausedUntil: MonotonicInstant?

        var isEmpty: Bool { waiting.isEmpty && !running }
    }

    /// How failures pace the publishing and its log.
    private struct Failures {
        var backoff: Backoff
        /// Nothing is published until then (a backoff after a failure).
        var pauseUntil: MonotonicInstant?
        var failingSince: MonotonicInstant?
        /// At once, then at most every 10 s while failures last.
        var log = LogRateLimit(intervalMilliseconds: 10_000)
    }

    private let loop: OutboxSinkLoop
    private let transport: any OutboxTransport
    private let signal: OutboxSignal
    private let acks: AckInbox
    private let deleted: DeleteInbox
    private let clock: any GatewayClock
    private let started: MonotonicInstant

    private var window = Window()
    private var deletes = Deletes()
    private var failures: Failures
    private var ended = false
    private var lastExpiryCheck: MonotonicInstant

    private var writer: OutboxWriter { loop.writer }
    private var outbox: any Outbox { loop.writer.outbox }
    private var context: ComponentContext { loop.writer.context }

    init(loop: OutboxSinkLoop, transport: any OutboxTransport, signal: OutboxSignal, acks: AckInbox) {
        self.loop = loop
        self.transport = transport
        self.signal = signal
        self.acks = acks
        deleted = DeleteInbox(signal: signal)
        clock = loop.writer.context.clock
        started = clock.monotonicNow()
        lastExpiryCheck = started
        failures = Failures(backoff: Backoff(initial: loop.retryInitial, cap: loop.retryMax, multiplier: 2, jitter: 0.2))
    }

    /// Publishes until the input ended and the queue is empty; throws `CancellationError` when
    /// cancelled, after deleting what was acknowledged.
    mutating func run() async throws {
        do {
            while try await pass() {}
        } catch {
            // Cancelled at the shutdown deadline (or failed): what was acknowledged is deleted now
            // (a delete in progress finishes on the outbox's thread before it closes).
            if !deletes.waiting.isEmpty { try? outbox.remove(deletes.waiting) }
            throw error
        }
    }

    /// One pass; false when everything is delivered and the input ended.
    private mutating func pass() async throws -> Bool {
        try Task.checkCancellation()
        try settle()
        try collectDeletes()
        startDeletes()
        try flushRejections()
        if !isPaused { try publishPending() }
        let idle = window.isEmpty && deletes.isEmpty
        if ended && idle && outbox.depth == 0 { return false }
        // Wake for acks and new records; while paused, when the pause ends; with records
        // queued, at least every second so `queue.max_age` applies during a long outage.
        var timeout: Duration? = outbox.depth > 0 ? .seconds(1) : nil
        if let until = failures.pauseUntil { timeout = min(timeout ?? .seconds(1), max(.milliseconds(1), until - clock.monotonicNow())) }
        if let until = deletes.pausedUntil { timeout = min(timeout ?? loop.diskRetry, max(.milliseconds(1), until - clock.monotonicNow())) }
        if ended && idle {
            // Queued but nothing in flight at the end: records the transport never took.
            window.sentThrough = 0
            timeout = .milliseconds(100)
        }
        let flags = if let timeout { await signal.wait(timeout: timeout) } else { await signal.wait() }
        ended = ended || flags.ended
        if clock.monotonicNow() - lastExpiryCheck >= .seconds(1) {
            lastExpiryCheck = clock.monotonicNow()
            _ = try writer.writes.attempt("drop expired messages", kind: "expiry") { try writer.dropExpired() }
        }
        return true
    }

    /// True while a backoff holds publishing; clears a pause that ended.
    private var isPaused: Bool {
        mutating get {
            guard let until = failures.pauseUntil else { return false }
            if clock.monotonicNow() < until { return true }
            failures.pauseUntil = nil
            return false
        }
    }

    // MARK: - Publishing

    /// Failed records first, oldest first; then fresh ones, refilled in chunks (a quarter of the
    /// window), not one record per acknowledgement.
    private mutating func publishPending() throws {
        let size = loop.window
        while !window.resend.isEmpty, window.inFlight.count < size {
            let record = window.resend[0]
            guard send(record, retain: try retainFlag(record)) else { break }
            window.resend.removeFirst()
        }
        guard window.resend.isEmpty, failures.pauseUntil == nil,
              window.inFlight.isEmpty || size - window.inFlight.count >= max(1, size / 4) else { return }
        let fresh = try outbox.records(after: window.sentThrough, limit: size - window.inFlight.count)
        var newest: [String: Int64] = [:]
        for record in fresh {
            var retain = false
            if loop.retainNewestPerKey {
                if newest[record.key] == nil { newest[record.key] = try outbox.newestSeq(forKey: record.key) ?? record.seq }
                retain = newest[record.key] == record.seq
            }
            guard send(record, retain: retain) else { break }
            window.sentThrough = record.seq
        }
    }

    /// Hands a record to the transport; false when it could not take it now.
    private mutating func send(_ record: OutboxRecord, retain: Bool) -> Bool {
        window.inFlight[record.seq] = record
        acks.handedOver()
        let acks = self.acks
        do {
            try transport.publish(record, retain: retain) { ack in acks.post(record.seq, ack) }
            return true
        } catch let rejection as OutboxRejection {
            // Settled like a broker's refusal, at the next settle.
            acks.post(record.seq, .rejected(reason: rejection.reason))
            return true
        } catch {
            acks.notHandedOver()
            window.inFlight.removeValue(forKey: record.seq)
            noteFailure("cannot publish: \(error)")
            return false
        }
    }

    private func retainFlag(_ record: OutboxRecord) throws -> Bool {
        guard loop.retainNewestPerKey else { return false }
        return try outbox.newestSeq(forKey: record.key) == record.seq
    }

    // MARK: - Acknowledgements

    /// Takes the acks that arrived: accepted rows wait for their delete, retried ones go back to
    /// the front, refused ones to the dead letters.
    private mutating func settle() throws {
        let taken = acks.take()
        guard !taken.isEmpty else { return }
        var accepted: [Int64] = []
        var retried = 0
        var lastReason = ""
        for (seq, ack) in taken {
            guard let record = window.inFlight.removeValue(forKey: seq) else { continue }
            switch ack {
            case .accepted: accepted.append(seq)
            case .rejected(let reason): window.rejected.append((record, reason))
            case .retry(let reason):
                window.resend.append(record)
                retried += 1
                lastReason = reason
            }
        }
        if !accepted.isEmpty {
            deletes.waiting += accepted
            context.stats.addEmitted(accepted.count)
            context.stats.count("\(loop.statsPrefix).sent", by: accepted.count)
            if failures.failingSince != nil, retried == 0 {
                failures.failingSince = nil
                failures.backoff.reset()
                context.logger.info("delivering again")
            }
        }
        if retried > 0 {
            window.resend.sort { $0.seq < $1.seq }
            context.stats.count("\(loop.statsPrefix).retried", by: retried)
            noteFailure("\(retried) message(s) not acknowledged: \(lastReason)")
        }
    }

    /// Pauses publishing for the next backoff step and logs (rate-limited).
    private mutating func noteFailure(_ reason: String) {
        let now = clock.monotonicNow()
        let delay = failures.backoff.next()
        failures.pauseUntil = now + delay
        if failures.failingSince == nil { failures.failingSince = now }
        if failures.log.allow("delivery", now: (now - started).milliseconds) != nil {
            context.logger.warning("\(reason); \(outbox.depth) queued, retrying in \(DurationText.format(delay))")
        }
    }

    /// Moves refused records to the dead letters; a full disk keeps them for the next pass
    /// instead of failing the sink (the rows stay queued and are re-sent at worst).
    private mutating func flushRejections() throws {
        guard !window.rejected.isEmpty else { return }
        let batch = window.rejected, writer = self.writer
        let moved = try writer.writes.attempt("move \(batch.count) refused message(s) to the dead letters", kind: "dead letters") {
            for (record, reason) in batch { try writer.deadLetter([record], status: 0, answer: reason) }
        }
        guard moved else { return }
        for (record, reason) in batch {
            context.logger.error("broker refused position \(record.id) on \(record.key.isEmpty ? "its subject" : record.key): \(reason); moved to dead letters")
        }
        window.rejected.removeAll()
    }

    // MARK: - Deletes

    /// Takes the outcome of the delete in progress; a full disk keeps its rows for the next one.
    private mutating func collectDeletes() throws {
        guard let (seqs, result) = deleted.take() else { return }
        deletes.running = false
        switch result {
        case .success:
            if let held = writer.writes.succeeded("delete") {
                context.logger.warning("queue: delete acknowledged message(s): done after \(DurationText.format(held)) of a full disk")
            }
        case .failure(let e as OutboxError) where e.isDiskFull:
            writer.writes.failed("delete", message: "\(e): cannot delete \(seqs.count) acknowledged message(s); retrying every \(DurationText.format(loop.diskRetry))")
            deletes.waiting = seqs + deletes.waiting
            deletes.pausedUntil = clock.monotonicNow() + loop.diskRetry
        case .failure(let e):
            throw e
        }
    }

    /// Starts the delete of every acknowledged row waiting, unless one runs or a full disk pauses them.
    private mutating func startDeletes() {
        guard !deletes.running, !deletes.waiting.isEmpty else { return }
        if let until = deletes.pausedUntil, clock.monotonicNow() < until { return }
        deletes.pausedUntil = nil
        let seqs = deletes.waiting, deleted = self.deleted
        deletes.waiting.removeAll(keepingCapacity: true)
        deletes.running = true
        outbox.remove(seqs) { result in deleted.post(seqs, result) }
    }
}
