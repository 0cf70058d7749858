import Foundation
import GatewayCore
import PositionEncoding
import DeliveryEngine

/// Uploads positions in batches over HTTP, from a queue that keeps them until the server accepted them.
///
/// The delivery itself (committing, batching by count, bytes and interval, one request in
/// flight, backoff and Retry-After, dead letters, the in-flight mark, full disks) is the shared
/// ``OutboxBatchLoop``; this sink is its configuration, its encoder (a position's record in the
/// request body, encoded once at commit and kept in the queue: ``makeEncoder()``) and its transport (``HTTPBatchTransport``: the body format, the request, the
/// reading of the answer).
public struct HTTPSink: PositionSink {
    let configuration: HTTPSinkConfiguration
    let context: ComponentContext
    let queue: any Outbox
    let loop: OutboxBatchLoop

    /// Builds the sink on an open queue.
    init(configuration: HTTPSinkConfiguration, context: ComponentContext, outbox: any Outbox) {
        self.configuration = configuration
        self.context = context
        self.queue = outbox
        loop = OutboxBatchLoop(
            writer: OutboxWriter(outbox: outbox, mode: configuration.queue, context: context),
            options: .init(maxRecords: configuration.maxPositions, maxBytes: configuration.maxBytes, interval: configuration.interval,
                           retryInitial: configuration.retryInitial, retryMax: configuration.retryMax,
                           retryMaxAttempts: configuration.retryMaxAttempts, marksInFlight: true, statsPrefix: "http"))
    }

    public func run(input: any SinkInput) async throws {
        let client = try HTTPTransport(options: configuration.transport)
        let transport = HTTPBatchTransport(sink: self, client: client)
        // Closed on every way out, so a clean exit leaves no WAL file behind.
        defer { queue.close() }
        let sink = self
        do {
            try await loop.run(input: input, transport: transport) { sink.makeEncoder() }
        } catch {
            await client.close()
            throw error
        }
        // libcurl's thread is done before the sink is: see HTTPTransport.close().
        await client.close()
    }

    /// The outbox key of a record queued as the bytes it adds to a request body (this sink's
    /// `body.format` when it was committed). Records with an empty key, queued by earlier versions
    /// that kept a position's JSON, are encoded with the current format when they are sent.
    static let encodedKey = "body"

    /// What the receiving task commits for each position: its record in the request body, encoded
    /// once, here (a template's fields mapped, a GeoJSON feature written). A request is then its
    /// records' bytes between the format's header and trailer; a reload that changes the body
    /// leaves queued records as they were committed.
    func makeEncoder() -> (Position) -> OutboxEntry {
        let format = configuration.body
        // Consecutive positions usually carry the same attributes: their text is written once.
        var textCache = PositionJSON.TextCache()
        return { p in
            var record: [UInt8] = []
            record.reserveCapacity(320)
            if format.usesStoredJSON {
                // The position object is the record (jsonl's newline is the format's, at send).
                PositionJSON.append(p, to: &record, cache: &textCache)
            } else {
                format.appendRecord(storedJSON: [], position: p, to: &record)
            }
            return OutboxEntry(id: p.id, key: Self.encodedKey, payload: record, time: p.time?.milliseconds)
        }
    }

    /// A batch read from the front of the queue, encoded.
    struct PreparedBatch {
        var records: [OutboxRecord]
        var body: [UInt8]
        /// True when a count or size limit ended it (more may be queued).
        var isFull: Bool
    }

    /// The batch the sink would send next; nil when the queue is empty.
    func prepareBatch() throws -> PreparedBatch? {
        guard let p = try loop.prepareBatch(HTTPBatchTransport(sink: self, client: nil)) else { return nil }
        return PreparedBatch(records: p.records, body: p.batch, isFull: p.isFull)
    }

    /// The body for the oldest of `records` up to `batch.max_bytes`; how many it holds.
    func encode(_ records: [OutboxRecord]) -> (body: [UInt8], count: Int) {
        let format = configuration.body
        var body = format.header
        body.reserveCapacity(records.count * 300)
        let separator = format.separator
        let trailerCount = format.trailer.count
        var taken = 0
        for r in records {
            let mark = body.count
            if taken > 0 { body.append(contentsOf: separator) }
            if r.key == Self.encodedKey {
                format.appendEncoded(r.payload, to: &body)
            } else {
                let position = format.usesStoredJSON ? nil : decode(r)
                format.appendRecord(storedJSON: r.payload, position: position, to: &body)
            }
            // A lone record over the limit still goes: it could never be sent otherwise.
            if taken > 0 && body.count + trailerCount > configuration.maxBytes {
                body.removeLast(body.count - mark)
                break
            }
            taken += 1
        }
        body.append(contentsOf: format.trailer)
        return (body, taken)
    }

    private func decode(_ r: OutboxRecord) -> Position? {
        guard let value = try? JSONValue.parse(r.payload),
              let p = try? PositionJSON.decode(value, source: "", makeID: { _ in r.id }) else {
            context.logger.warning("queued record \(r.seq) is not a position; sending it without its fields")
            return nil
        }
        return p
    }

    func classify(_ answer: HTTPAnswer) -> OutboxBatchOutcome {
        let text = HTTPSink.snippet(answer.body)
        switch answer.status {
        case 200..<300:
            guard let predicate = configuration.successPredicate, !predicate.accepts(answer.body) else { return .accepted }
            switch configuration.onMismatch {
            case .retry: return .retry(reason: "status \(answer.status) but the answer fails \(predicate.description): \(text)", after: nil, status: answer.status, answer: text)
            case .deadLetter: return .rejected(status: answer.status, answer: text)
            }
        case 300..<400:
            // Not followed (see RefuseRedirects): nothing was delivered. Retrying keeps the batch
            // queued until the url is fixed; the log says where the server points.
            let target = answer.location.map { " to \($0)" } ?? ""
            return .retry(reason: "status \(answer.status): the server redirects\(target); locgate does not follow redirects (a redirected POST loses its body), set url to the final address", after: nil, status: answer.status, answer: text)
        case 408, 429, 500..<600:
            return .retry(reason: "status \(answer.status): \(text)", after: HTTPSink.parseRetryAfter(answer.retryAfter, now: context.clock.now()), status: answer.status, answer: text)
        default:
            return .rejected(status: answer.status, answer: text)
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

    func makeRequest(_ records: [OutboxRecord], body: [UInt8]) throws -> HTTPRequest {
        var headers = ["Content-Type: \(configuration.body.contentType)"]
        headers += configuration.headers.map { "\($0.name): \($0.value)" }
        if let auth = configuration.authorization { headers.append("Authorization: \(auth)") }
        headers.append("Idempotency-Key: \(HTTPSink.idempotencyKey(records))")
        var sent = body
        if configuration.gzip {
            headers.append("Content-Encoding: gzip")
            sent = try Gzip.compress(body)
        }
        return HTTPRequest(method: configuration.method.rawValue, url: configuration.url, headers: headers, body: sent)
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

/// The http sink's side of ``OutboxBatchLoop``: a batch is its request body.
struct HTTPBatchTransport: OutboxBatchTransport {
    let sink: HTTPSink
    /// Nil only to encode (tests read the next batch without a client).
    let client: HTTPTransport?

    func encode(_ records: [OutboxRecord]) throws -> (batch: [UInt8], count: Int) {
        let (body, count) = sink.encode(records)
        return (body, count)
    }

    func send(_ body: [UInt8], records: [OutboxRecord]) async throws -> OutboxBatchOutcome {
        guard let client else { throw HTTPSinkError(message: "no HTTP client") }
        let request = try sink.makeRequest(records, body: body)
        do {
            return sink.classify(try await client.send(request))
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            try Task.checkCancellation()
            return .retry(reason: "\(error)", after: nil, status: 0, answer: "")
        }
    }
}

/// A run-time failure of the HTTP sink.
public struct HTTPSinkError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
