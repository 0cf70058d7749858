import GatewayCore
import Locking

/// Hands one record to a broker client library (the half of a broker sink that talks to the peer).
///
/// Implementation requirements:
/// - `done` is called exactly once per successful `publish`, from any thread: `.accepted` only on the
///   broker's acknowledgement for that message (MQTT PUBACK/PUBCOMP, JetStream PubAck), or at once
///   for modes documented as lossy (QoS 0, core NATS).
/// - `publish` throws when the record cannot be handed over now (not connected, the library's queue
///   is full); `done` is then never called and the loop tries again after a backoff.
public protocol OutboxTransport: Sendable {
    func publish(_ record: OutboxRecord, retain: Bool, done: @escaping @Sendable (OutboxAck) -> Void) throws
}

/// Thrown by ``OutboxTransport/publish(_:retain:done:)`` for a record that can never be sent (an
/// invalid topic, a message over the broker's size limit): it goes to the dead letters instead of
/// blocking every record behind it.
public struct OutboxRejection: Error, CustomStringConvertible {
    public var reason: String
    public init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// A broker's answer for one message.
public enum OutboxAck: Sendable {
    case accepted
    /// Not delivered, may succeed later (timeout, lost connection, broker busy): sent again.
    case retry(reason: String)
    /// Refused for good (not authorised, too large): moved to the dead letters.
    case rejected(reason: String)
}

/// The run loop of a broker sink: one task commits what arrives, another publishes what is queued.
///
///     SinkInput ──▶ commit (OutboxWriter) ──▶ [outbox] ──▶ publish, ≤ window unacknowledged ──▶ transport
///                                               ▲                                               │
///                                               └──── delete on .accepted (batched) ◀── acks ───┘
///
/// - A row is deleted only on `.accepted`. Deletes run on the outbox's own thread, one at a time,
///   while publishing goes on; each takes every ack that arrived during the one before (one
///   transaction). A full disk keeps them for a later try (``QueueWrites``).
/// - `.retry` puts a record back: it is sent again, oldest first, after a capped backoff, before new
///   records; order among records that never failed is queue order.
/// - With `retainNewestPerKey`, a record is published with `retain` only when it is the newest queued
///   record of its key, so a backlog goes out unretained and the retained message is never older
///   than the newest one sent.
/// - Returns when the input ended and the queue is empty, or, with a durable queue, at once when
///   the pipeline asks for a prompt stop (``OutboxHalves``); on cancellation (the shutdown
///   deadline) throws `CancellationError`. Either way what is left stays queued for the next start.
public struct OutboxSinkLoop: Sendable {
    let writer: OutboxWriter
    let window: Int
    let retainNewestPerKey: Bool
    let statsPrefix: String
    let retryInitial: Duration
    let retryMax: Duration
    /// How long a delete that found the disk full waits before it is tried again.
    let diskRetry: Duration

    public var outbox: any Outbox { writer.outbox }
    var context: ComponentContext { writer.context }

    public init(outbox: any Outbox, mode: OutboxMode, context: ComponentContext, window: Int, retainNewestPerKey: Bool,
                statsPrefix: String, retryInitial: Duration = .milliseconds(200), retryMax: Duration = .seconds(30),
                diskRetry: Duration = .seconds(1)) {
        writer = OutboxWriter(outbox: outbox, mode: mode, context: context)
        self.window = max(1, window)
        self.retainNewestPerKey = retainNewestPerKey
        self.statsPrefix = statsPrefix
        self.retryInitial = retryInitial
        self.retryMax = retryMax
        self.diskRetry = diskRetry
    }

    public func run(input: any SinkInput, transport: any OutboxTransport, encode: @escaping @Sendable (Position) -> OutboxEntry) async throws {
        let signal = OutboxSignal(clock: context.clock)
        let acks = AckInbox(signal: signal, wakeEvery: max(1, window / 8))
        if outbox.depth > 0 { context.logger.info("resuming with \(outbox.depth) queued position(s)") }
        defer { writer.reportLeftOver() }
        try await OutboxHalves.run(input: input, writer: writer, receive: {
            while let batch = await input.next() {
                try await writer.commit(batch.map(encode), acknowledging: input)
                signal.post()
            }
            signal.post(ended: true)
        }, deliver: {
            try await publish(transport: transport, signal: signal, acks: acks)
        })
    }

    // MARK: - Publishing

    private func publish(transport: any OutboxTransport, signal: OutboxSignal, acks: AckInbox) async throws {
        var sentThrough: Int64 = 0
        var inFlight: [Int64: OutboxRecord] = [:]
        var resend: [OutboxRecord] = []
        var ended = false
        var backoff = Backoff(initial: retryInitial, cap: retryMax, multiplier: 2, jitter: 0.2)
        var pauseUntil: MonotonicInstant?
        var failingSince: MonotonicInstant?
        // At once, then at most every 10 s while failures last.
        var failureLog = LogRateLimit(intervalMilliseconds: 10_000)
        let clock = context.clock
        let started = clock.monotonicNow()
        var lastExpiryCheck = clock.monotonicNow()
        // Acknowledged rows not deleted yet. Deletes run on the outbox's own thread, one at a time,
        // while publishing goes on: each takes every ack that arrived during the previous one (one
        // transaction, one fsync, for many acks; a broker acknowledges far faster than a commit per
        // ack could keep up with). A crash before the delete only re-sends those messages
        // (at-least-once; message ids dedupe).
        var toDelete: [Int64] = []
        var deleting = false
        // While the disk is full, the next delete waits this long after a failed one.
        var deletePausedUntil: MonotonicInstant?
        let deleted = DeleteInbox(signal: signal)

        var pendingRejections: [(OutboxRecord, String)] = []

        /// Runs a write that frees rows; a full disk keeps the work for the next pass instead of
        /// failing the sink (the rows stay queued and are re-sent at worst).
        func tolerantWrite(_ what: String, kind: String, _ body: () throws -> Void) throws -> Bool {
            try writer.writes.attempt(what, kind: kind, body)
        }

        func flushRejections() throws {
            guard !pendingRejections.isEmpty else { return }
            let batch = pendingRejections
            if try tolerantWrite("move \(batch.count) refused message(s) to the dead letters", kind: "dead letters", {
                for (record, reason) in batch { try writer.deadLetter([record], status: 0, answer: reason) }
            }) {
                for (record, reason) in batch {
                    context.logger.error("broker refused position \(record.id) on \(record.key.isEmpty ? "its subject" : record.key): \(reason); moved to dead letters")
                }
                pendingRejections.removeAll()
            }
        }

        /// Takes the outcome of the delete in progress; a full disk keeps its rows for the next one.
        func collectDeletes() throws {
            guard let (seqs, result) = deleted.take() else { return }
            deleting = false
            switch result {
            case .success:
                if let held = writer.writes.succeeded("delete") {
                    context.logger.warning("queue: delete acknowledged message(s): done after \(DurationText.format(held)) of a full disk")
                }
            case .failure(let e as OutboxError) where e.isDiskFull:
                writer.writes.failed("delete", message: "\(e): cannot delete \(seqs.count) acknowledged message(s); retrying every \(DurationText.format(diskRetry))")
                toDelete = seqs + toDelete
                deletePausedUntil = clock.monotonicNow() + diskRetry
            case .failure(let e):
                throw e
            }
        }

        func startDeletes() {
            guard !deleting, !toDelete.isEmpty else { return }
            if let until = deletePausedUntil, clock.monotonicNow() < until { return }
            deletePausedUntil = nil
            let seqs = toDelete
            toDelete.removeAll(keepingCapacity: true)
            deleting = true
            outbox.remove(seqs) { result in deleted.post(seqs, result) }
        }

        func settle() throws {
            let taken = acks.take()
            guard !taken.isEmpty else { return }
            var accepted: [Int64] = []
            var rejected: [(OutboxRecord, String)] = []
            var retried = 0
            var lastReason = ""
            for (seq, ack) in taken {
                guard let record = inFlight.removeValue(forKey: seq) else { continue }
                switch ack {
                case .accepted: accepted.append(seq)
                case .rejected(let reason): rejected.append((record, reason))
                case .retry(let reason):
                    resend.append(record)
                    retried += 1
                    lastReason = reason
                }
            }
            if !accepted.isEmpty {
                toDelete += accepted
                context.stats.addEmitted(accepted.count)
                context.stats.count("\(statsPrefix).sent", by: accepted.count)
                if failingSince != nil, retried == 0 {
                    failingSince = nil
                    backoff.reset()
                    context.logger.info("delivering again")
                }
            }
            pendingRejections += rejected
            if retried > 0 {
                resend.sort { $0.seq < $1.seq }
                context.stats.count("\(statsPrefix).retried", by: retried)
                noteFailure("\(retried) message(s) not acknowledged: \(lastReason)")
            }
        }

        func noteFailure(_ reason: String) {
            let now = clock.monotonicNow()
            let delay = backoff.next()
            pauseUntil = now + delay
            if failingSince == nil { failingSince = now }
            if failureLog.allow("delivery", now: (now - started).milliseconds) != nil {
                context.logger.warning("\(reason); \(outbox.depth) queued, retrying in \(DurationText.format(delay))")
            }
        }

        /// Hands a record to the transport; false when it could not take it now.
        func send(_ record: OutboxRecord, retain: Bool) -> Bool {
            inFlight[record.seq] = record
            acks.handedOver()
            do {
                try transport.publish(record, retain: retain) { ack in acks.post(record.seq, ack) }
                return true
            } catch let rejection as OutboxRejection {
                // Settled like a broker's refusal, at the next settle.
                acks.post(record.seq, .rejected(reason: rejection.reason))
                return true
            } catch {
                acks.notHandedOver()
                inFlight.removeValue(forKey: record.seq)
                noteFailure("cannot publish: \(error)")
                return false
            }
        }

        func loop() async throws {
            while true {
                try Task.checkCancellation()
                try settle()
                try collectDeletes()
                startDeletes()
                try flushRejections()
                let paused = pauseUntil.map { clock.monotonicNow() < $0 } ?? false
                if !paused {
                    pauseUntil = nil
                    // Failed records first, oldest first.
                    while !resend.isEmpty, inFlight.count < window {
                        let record = resend[0]
                        guard send(record, retain: try retainFlag(record)) else { break }
                        resend.removeFirst()
                    }
                    // Refill in chunks (a quarter of the window), not one record per acknowledgement.
                    if resend.isEmpty, pauseUntil == nil, inFlight.isEmpty || window - inFlight.count >= max(1, window / 4) {
                        let fresh = try outbox.records(after: sentThrough, limit: window - inFlight.count)
                        var newest: [String: Int64] = [:]
                        for record in fresh {
                            var retain = false
                            if retainNewestPerKey {
                                if newest[record.key] == nil { newest[record.key] = try outbox.newestSeq(forKey: record.key) ?? record.seq }
                                retain = newest[record.key] == record.seq
                            }
                            guard send(record, retain: retain) else { break }
                            sentThrough = record.seq
                        }
                    }
                }
                let idle = inFlight.isEmpty && resend.isEmpty && pendingRejections.isEmpty && !deleting && toDelete.isEmpty
                if ended && idle && outbox.depth == 0 { return }
                // Wake for acks and new records; while paused, when the pause ends; with records
                // queued, at least every second so `queue.max_age` applies during a long outage.
                var timeout: Duration? = outbox.depth > 0 ? .seconds(1) : nil
                if let until = pauseUntil { timeout = min(timeout ?? .seconds(1), max(.milliseconds(1), until - clock.monotonicNow())) }
                if let until = deletePausedUntil { timeout = min(timeout ?? diskRetry, max(.milliseconds(1), until - clock.monotonicNow())) }
                if ended && idle {
                    // Queued but nothing in flight at the end: records the transport never took.
                    sentThrough = 0
                    timeout = .milliseconds(100)
                }
                let flags = if let timeout { await signal.wait(timeout: timeout) } else { await signal.wait() }
                ended = ended || flags.ended
                if clock.monotonicNow() - lastExpiryCheck >= .seconds(1) {
                    lastExpiryCheck = clock.monotonicNow()
                    _ = try tolerantWrite("drop expired messages", kind: "expiry") { try writer.dropExpired() }
                }
            }
        }

        do {
            try await loop()
        } catch {
            // Cancelled at the shutdown deadline (or failed): what was acknowledged is deleted now
            // (a delete in progress finishes on the outbox's thread before it closes).
            if !toDelete.isEmpty { try? outbox.remove(toDelete) }
            throw error
        }
    }

    private func retainFlag(_ record: OutboxRecord) throws -> Bool {
        guard retainNewestPerKey else { return false }
        return try outbox.newestSeq(forKey: record.key) == record.seq
    }
}

/// The outcome of the delete in progress (``Outbox/remove(_:done:)``), until the publishing task takes it.
final class DeleteInbox: Sendable {
    private let outcome = Locked<([Int64], Result<Void, any Error>)?>(nil)
    private let signal: OutboxSignal

    init(signal: OutboxSignal) { self.signal = signal }

    func post(_ seqs: [Int64], _ result: Result<Void, any Error>) {
        outcome.withLock { $0 = (seqs, result) }
        signal.post()
    }

    func take() -> ([Int64], Result<Void, any Error>)? {
        outcome.withLock { o in
            defer { o = nil }
            return o
        }
    }
}

/// Acks from the client library's threads, collected until the publishing task takes them.
///
/// A broker acknowledges tens of thousands of messages a second; waking the publishing task for
/// each would cost more than the publishing. It is woken once `wakeEvery` acks are waiting (room
/// for a refill), for every ack that is not an acceptance (a retry or a refusal is handled at
/// once), and when nothing handed over is left unanswered (the end of a burst).
final class AckInbox: Sendable {
    private struct State {
        var acks: [(Int64, OutboxAck)] = []
        /// Records handed to the transport whose ack has not arrived.
        var outstanding = 0
    }

    private let state = Locked(State())
    private let signal: OutboxSignal
    private let wakeEvery: Int

    init(signal: OutboxSignal, wakeEvery: Int) {
        self.signal = signal
        self.wakeEvery = max(1, wakeEvery)
    }

    /// Counts a record about to be handed over (before, so its ack cannot come first).
    func handedOver() { state.withLock { $0.outstanding += 1 } }

    /// Undoes ``handedOver()`` for a record the transport did not take.
    func notHandedOver() { state.withLock { $0.outstanding -= 1 } }

    func post(_ seq: Int64, _ ack: OutboxAck) {
        let wake = state.withLock { s in
            s.acks.append((seq, ack))
            s.outstanding -= 1
            if case .accepted = ack { return s.acks.count >= wakeEvery || s.outstanding <= 0 }
            return true
        }
        if wake { signal.post() }
    }

    func take() -> [(Int64, OutboxAck)] {
        state.withLock { s in
            let out = s.acks
            s.acks.removeAll(keepingCapacity: true)
            return out
        }
    }
}
