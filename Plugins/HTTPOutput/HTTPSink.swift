import Foundation
import GatewayCore
import Outbox

/// Uploads positions in batches over HTTP, from a queue that keeps them until the server accepted them.
///
/// Two child tasks share the queue (an ``Outbox``):
///
///     SinkInput ──▶ receiver: commit to queue, acknowledge ──▶ [queue] ──▶ uploader: oldest batch first
///                      │ (count, bytes or interval reached)          ▲
///                      └──────────────── OutboxSignal ───────────────┘
///
/// - The receiver commits every batch it reads (one SQLite transaction) and only then calls
///   `acknowledge()`, so in durable mode the upstream counts a position as accepted once it is on disk.
/// - It asks for a flush when `batch.max_positions` / `batch.max_bytes` are reached (full batches
///   only) or when `batch.interval` has passed since the first unflushed position (everything).
/// - The single uploader sends the oldest records first and deletes them only after success;
///   retryable failures are retried with backoff before anything newer is sent, so order holds.
public struct HTTPSink: PositionSink {
    let configuration: HTTPSinkConfiguration
    let context: ComponentContext
    let queue: any Outbox
    let writer: OutboxWriter

    /// Builds the sink on an open queue.
    init(configuration: HTTPSinkConfiguration, context: ComponentContext, outbox: any Outbox) {
        self.configuration = configuration
        self.context = context
        self.queue = outbox
        self.writer = OutboxWriter(outbox: outbox, mode: configuration.queue, context: context)
    }

    public func run(input: any SinkInput) async throws {
        let signal = OutboxSignal()
        let transport = try HTTPTransport(options: configuration.transport)
        // Closed on every way out, so a clean exit leaves no WAL file behind.
        defer {
            writer.reportLeftOver()
            queue.close()
        }
        if queue.depth > 0 {
            context.logger.info("resuming with \(queue.depth) queued position(s)")
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await receive(input: input, signal: signal) }
            group.addTask { try await upload(signal: signal, transport: transport) }
            do {
                try await group.waitForAll()
            } catch {
                group.cancelAll()
                signal.post(ended: true, flushAll: true)
                throw error
            }
        }
    }

    // MARK: - Receiving

    private func receive(input: any SinkInput, signal: OutboxSignal) async throws {
        var unflushedCount = 0
        var unflushedBytes = 0
        var firstUnflushed: ContinuousClock.Instant?
        let clock = ContinuousClock()
        var records: [OutboxEntry] = []
        // Consecutive positions usually carry the same attributes: their text is written once.
        var textCache = PositionJSON.TextCache()
        func intervalFlush() {
            if unflushedCount > 0 || queue.depth > 0 { signal.post(ended: false, flushAll: true) }
            unflushedCount = 0
            unflushedBytes = 0
            firstUnflushed = nil
        }
        while true {
            // A cancelled wait returns `.timeout` at once: without this check the loop would spin.
            try Task.checkCancellation()
            let wait: Duration
            if let first = firstUnflushed {
                wait = max(.milliseconds(1), configuration.interval - (clock.now - first))
            } else {
                wait = configuration.interval
            }
            switch await input.next(timeout: wait) {
            case .positions(let batch):
                records.removeAll(keepingCapacity: true)
                for p in batch {
                    var json: [UInt8] = []
                    json.reserveCapacity(320)
                    PositionJSON.append(p, to: &json, cache: &textCache)
                    unflushedBytes += json.count + 1
                    records.append(OutboxEntry(id: p.id, payload: json, time: p.time?.milliseconds))
                }
                try await writer.commit(records, acknowledging: input)
                unflushedCount += batch.count
                if firstUnflushed == nil { firstUnflushed = clock.now }
                if unflushedCount >= configuration.maxPositions || unflushedBytes >= configuration.maxBytes {
                    signal.post(ended: false, flushAll: false)
                    unflushedCount %= configuration.maxPositions
                    unflushedBytes = 0
                    if unflushedCount == 0 { firstUnflushed = nil }
                }
                // A steady stream never lets `next` time out: the interval is checked here too.
                if let first = firstUnflushed, clock.now - first >= configuration.interval {
                    intervalFlush()
                }
            case .timeout:
                intervalFlush()
                try writer.dropExpired()
            case .end:
                signal.post(ended: true, flushAll: true)
                return
            }
        }
    }

    // MARK: - Uploading

    /// A batch read from the front of the queue, encoded.
    struct PreparedBatch {
        var records: [OutboxRecord]
        var body: [UInt8]
        /// True when a count or size limit ended it (more may be queued).
        var isFull: Bool
    }

    private func upload(signal: OutboxSignal, transport: HTTPTransport) async throws {
        // Positions still to send before waiting for a full batch again: an interval flush (or a
        // restart) sends what was queued at that moment, not whatever arrives while it is sending —
        // otherwise every fix arriving during a request would go out as its own partial batch.
        var flushRemaining = queue.depth
        var ended = false
        func take(_ s: OutboxSignal.Flags) {
            ended = ended || s.ended
            if s.flushAll { flushRemaining = max(flushRemaining, queue.depth) }
        }
        while true {
            try Task.checkCancellation()
            guard let batch = try prepareBatch() else {
                if ended { return }
                flushRemaining = 0
                take(await signal.wait())
                try Task.checkCancellation()
                continue
            }
            if batch.isFull || flushRemaining > 0 || ended {
                try await deliver(batch, transport: transport)
                flushRemaining = max(0, flushRemaining - batch.records.count)
                continue
            }
            take(await signal.wait())
            try Task.checkCancellation()
        }
    }

    /// The oldest records up to the count and byte limits, encoded as the body; nil when the queue is empty.
    func prepareBatch() throws -> PreparedBatch? {
        var records = try queue.oldest(limit: configuration.maxPositions)
        guard !records.isEmpty else { return nil }
        // A batch that was in flight when the process stopped goes again exactly as it was, so
        // its Idempotency-Key matches the request the server may already have committed.
        let inFlight = queue.inFlightThrough
        if let f = inFlight, records[0].seq <= f { records = records.filter { $0.seq <= f } }
        let format = configuration.body
        var body = format.header
        body.reserveCapacity(records.count * 300)
        let separator = format.separator
        let trailerCount = format.trailer.count
        var taken = 0
        var full = records.count >= configuration.maxPositions || (inFlight.map { records[0].seq <= $0 } ?? false)
        for r in records {
            let mark = body.count
            if taken > 0 { body.append(contentsOf: separator) }
            let position = format.usesStoredJSON ? nil : decode(r)
            format.appendRecord(storedJSON: r.payload, position: position, to: &body)
            // A lone record over the limit still goes: it could never be sent otherwise.
            if taken > 0 && body.count + trailerCount > configuration.maxBytes {
                body.removeLast(body.count - mark)
                full = true
                break
            }
            taken += 1
        }
        body.append(contentsOf: format.trailer)
        return PreparedBatch(records: Array(records.prefix(taken)), body: body, isFull: full)
    }

    private func decode(_ r: OutboxRecord) -> Position? {
        guard let value = try? JSONValue.parse(r.payload),
              let p = try? PositionJSON.decode(value, source: "", makeID: { _ in r.id }) else {
            context.logger.warning("queued record \(r.seq) is not a position; sending it without its fields")
            return nil
        }
        return p
    }

    /// Sends one batch until it is accepted or rejected for good; retries keep it at the front.
    private func deliver(_ batch: PreparedBatch, transport: HTTPTransport) async throws {
        guard let last = batch.records.last else { return }
        let request = try makeRequest(batch)
        try queue.markInFlight(through: last.seq)
        var backoff = Backoff(initial: configuration.retryInitial, cap: configuration.retryMax, multiplier: 2, jitter: 0.2)
        var attempt = 0
        while true {
            attempt += 1
            let outcome: Outcome
            do {
                let answer = try await transport.send(request)
                outcome = classify(answer)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                try Task.checkCancellation()
                outcome = .retry(reason: "\(error)", after: nil, status: 0, answer: "")
            }
            switch outcome {
            case .accepted:
                try queue.remove(through: last.seq)
                context.stats.addEmitted(batch.records.count)
                context.stats.count("http.sent", by: batch.records.count)
                context.stats.count("http.requests")
                if attempt > 1 { context.logger.info("delivered \(batch.records.count) position(s) after \(attempt) attempts") }
                return
            case .reject(let status, let answer):
                try deadLetter(batch, status: status, answer: answer)
                return
            case .retry(let reason, let retryAfter, let status, let answer):
                if configuration.retryMaxAttempts > 0 && attempt >= configuration.retryMaxAttempts {
                    context.logger.error("giving up after \(attempt) attempts: \(reason)")
                    try deadLetter(batch, status: status, answer: answer.isEmpty ? reason : answer)
                    return
                }
                var delay = backoff.next()
                if let retryAfter, retryAfter > delay { delay = retryAfter }
                context.stats.count("http.retried")
                let level: LogLevel = attempt == 1 || attempt % 10 == 0 ? .warning : .debug
                context.logger.log(level, "batch of \(batch.records.count) not delivered (attempt \(attempt)): \(reason); retrying in \(DurationText.format(delay))")
                try await context.clock.sleep(for: delay)
            }
        }
    }

    private func deadLetter(_ batch: PreparedBatch, status: Int, answer: String) throws {
        try writer.deadLetter(batch.records, status: status, answer: answer)
        let first = batch.records.first?.id ?? "", last = batch.records.last?.id ?? ""
        context.logger.error("server rejected a batch of \(batch.records.count) (ids \(first) … \(last)) with status \(status): \(answer); moved to dead letters")
    }

    enum Outcome {
        case accepted
        case reject(status: Int, answer: String)
        case retry(reason: String, after: Duration?, status: Int, answer: String)
    }

    func classify(_ answer: HTTPAnswer) -> Outcome {
        let text = HTTPSink.snippet(answer.body)
        switch answer.status {
        case 200..<300:
            guard let predicate = configuration.successPredicate, !predicate.accepts(answer.body) else { return .accepted }
            switch configuration.onMismatch {
            case .retry: return .retry(reason: "status \(answer.status) but the answer fails \(predicate.description): \(text)", after: nil, status: answer.status, answer: text)
            case .deadLetter: return .reject(status: answer.status, answer: text)
            }
        case 300..<400:
            // Not followed (see RefuseRedirects): nothing was delivered. Retrying keeps the batch
            // queued until the url is fixed; the log says where the server points.
            let target = answer.location.map { " to \($0)" } ?? ""
            return .retry(reason: "status \(answer.status): the server redirects\(target); locgate does not follow redirects (a redirected POST loses its body), set url to the final address", after: nil, status: answer.status, answer: text)
        case 408, 429, 500..<600:
            return .retry(reason: "status \(answer.status): \(text)", after: HTTPSink.parseRetryAfter(answer.retryAfter, now: context.clock.now()), status: answer.status, answer: text)
        default:
            return .reject(status: answer.status, answer: text)
        }
    }

    /// At most 500 characters of an answer, for logs and the dead-letter table.
    static func snippet(_ body: [UInt8]) -> String {
        let s = String(decoding: body.prefix(500), as: UTF8.self)
        return body.count > 500 ? s + "…" : s
    }

    /// `Retry-After` as seconds or an HTTP date; capped at one hour so a bad header cannot stall forever.
    static func parseRetryAfter(_ value: String?, now: Timestamp) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        let cap = 3600.0
        if let seconds = Double(value), seconds >= 0 { return .milliseconds(Int64(min(seconds, cap) * 1000)) }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = f.date(from: value) else { return nil }
        let seconds = date.timeIntervalSince1970 - now.seconds
        return .milliseconds(Int64(max(0, min(seconds, cap)) * 1000))
    }

    private func makeRequest(_ batch: PreparedBatch) throws -> HTTPRequest {
        var headers = ["Content-Type: \(configuration.body.contentType)"]
        headers += configuration.headers.map { "\($0.name): \($0.value)" }
        if let auth = configuration.authorization { headers.append("Authorization: \(auth)") }
        headers.append("Idempotency-Key: \(HTTPSink.idempotencyKey(batch.records))")
        var body = batch.body
        if configuration.gzip {
            headers.append("Content-Encoding: gzip")
            body = try Gzip.compress(batch.body)
        }
        return HTTPRequest(method: configuration.method.rawValue, url: configuration.url, headers: headers, body: body)
    }

    /// A key that is the same whenever the same positions are sent as one batch (after a restart too):
    /// FNV-1a of every id and the count.
    static func idempotencyKey(_ records: [OutboxRecord]) -> String {
        var h1: UInt64 = 0xcbf2_9ce4_8422_2325
        var h2: UInt64 = 0x8422_2325_cbf2_9ce4
        func mix(_ bytes: some Sequence<UInt8>) {
            for b in bytes {
                h1 = (h1 ^ UInt64(b)) &* 0x0000_0100_0000_01B3
                h2 = (h2 ^ UInt64(b)) &* 0x0000_0100_0000_01B3
            }
            h1 = (h1 ^ 0xFF) &* 0x0000_0100_0000_01B3
            h2 = (h2 ^ 0x1F) &* 0x0000_0100_0000_01B3
        }
        // Every id, not only the first and last: ids that repeat (untimed fixes after a restart)
        // must not make two different batches look like one to a server's idempotency cache.
        for r in records { mix(r.id.utf8) }
        mix(String(records.count).utf8)
        func hex(_ v: UInt64) -> String {
            let s = String(v, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }
        return hex(h1) + hex(h2)
    }
}

/// A run-time failure of the HTTP sink.
public struct HTTPSinkError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
