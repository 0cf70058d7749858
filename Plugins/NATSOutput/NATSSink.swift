import GatewayCore
import PositionEncoding
import Locking
import NATSClient
import DeliveryEngine

/// Publishes positions to NATS from an outbox that keeps each until the server acknowledged it.
///
///     SinkInput ──▶ OutboxSinkLoop: commit, acknowledge upstream ──▶ [outbox] ──▶ NATSTransport ──▶ JetStream
///                                                                       ▲                │
///                                                                       └─ PubAck / timeout ◀┘
///
/// - Every position is encoded once, at commit time: the subject (rendered from the template)
///   is the record's key, the JSON its payload, the position id its `Nats-Msg-Id`.
/// - JetStream: a record is deleted on its PubAck; a re-send (after a lost ack, a reconnect or a
///   crash) carries the same `Nats-Msg-Id`, so the stream's duplicate window drops it.
/// - Publishing waits until the connection is up and the stream is checked (created when
///   `stream` asks for it, then `expect_stream` must capture the subject); a failed check stops
///   the sink with an error. Meanwhile positions are still committed to the outbox.
/// - Core NATS (`jetstream: false`): a record is deleted when a flush after its publish returned.
public struct NATSSink: PositionSink {
    let configuration: NATSSinkConfiguration
    let context: ComponentContext
    let outbox: any Outbox

    init(configuration: NATSSinkConfiguration, context: ComponentContext, outbox: any Outbox) {
        self.configuration = configuration
        self.context = context
        self.outbox = outbox
    }

    public func run(input: any SinkInput) async throws {
        // Closed on every way out, so a clean exit leaves no WAL file behind.
        defer { outbox.close() }
        var named = configuration.connection
        named.name = "locgate \(context.id)"
        let options = named
        let transport = NATSTransport(configuration: configuration, context: context)
        let loop = OutboxSinkLoop(outbox: outbox, mode: configuration.queue, context: context, window: configuration.maxPending,
                                  retainNewestPerKey: false, statsPrefix: "nats",
                                  // Publishing waits for the connection: retry on its schedule.
                                  retryInitial: options.reconnectInitial, retryMax: options.reconnectMax)
        let subject = configuration.subject
        let encode: @Sendable (Position) -> OutboxEntry = { p in
            var json: [UInt8] = []
            json.reserveCapacity(320)
            PositionJSON.append(p, to: &json)
            return OutboxEntry(id: p.id, key: subject.render(p), payload: json, time: p.time?.milliseconds)
        }
        enum Finished: Sendable { case loop, supervisor, flusher }
        try await withThrowingTaskGroup(of: Finished.self) { group in
            group.addTask {
                try await loop.run(input: input, transport: transport, encode: encode)
                return .loop
            }
            group.addTask {
                try await supervise(transport, options: options)
                return .supervisor
            }
            if !configuration.jetstream {
                group.addTask {
                    try await transport.flushLoop()
                    return .flusher
                }
            }
            // The loop ends the sink: the helpers run until cancelled then, which they answer
            // with CancellationError.
            while let finished = try await group.next() {
                if finished == .loop {
                    group.cancelAll()
                    break
                }
            }
            while true {
                do {
                    if try await group.next() == nil { break }
                } catch is CancellationError {}
            }
        }
    }

    /// Keeps a connection for the transport until cancelled: connects (libnats then reconnects on
    /// its own), checks the stream once, and when the library closes the connection for good (it
    /// does after a server refused the same credentials twice) connects again after a backoff.
    private func supervise(_ transport: NATSTransport, options: NATSConnectionOptions) async throws {
        let jetStream = configuration.jetstream
            ? NATSJetStreamSettings(apiTimeout: max(configuration.ackTimeout, .seconds(2)),
                                    // The outbox keeps at most max_pending in flight; the margin
                                    // covers acks whose callback is still returning.
                                    maxPendingAcks: configuration.maxPending * 2, stallWait: .milliseconds(200))
            : nil
        let logger = context.logger, stats = context.stats
        var backoff = Backoff(initial: options.reconnectInitial, cap: options.reconnectMax)
        var checked = false
        while true {
            let connection = try await NATSConnection.connect(options, jetStream: jetStream) { event in
                NATSSink.log(event, logger: logger, stats: stats)
            }
            transport.attach(connection)
            do {
                if !checked {
                    try await prepare(connection)
                    checked = true
                }
                transport.open()
                try await connection.waitUntilClosed()
            } catch let error as NATSError {
                // Stream requests can fail while a cluster elects leaders: try again.
                logger.warning("\(error); connecting again")
            } catch {
                transport.detach()
                await connection.close()
                throw error
            }
            transport.detach()
            await connection.close()
            let delay = backoff.next()
            logger.warning("connecting again in \(DurationText.format(delay))")
            try await context.clock.sleep(for: delay)
        }
    }

    /// Waits for the connection, creates the stream when asked, and checks that `expect_stream`
    /// captures the subject; throws when it does not (retrying cannot fix a configuration).
    private func prepare(_ connection: NATSConnection) async throws {
        guard configuration.jetstream else { return }
        try await connection.waitUntilConnected()
        if let wanted = configuration.stream {
            let (info, created) = try await connection.createStream(wanted)
            if created {
                context.logger.info("created stream \(info.name) (subjects \(info.subjects.joined(separator: ", ")), \(info.replicas) replica(s), duplicate window \(DurationText.format(info.duplicateWindow)))")
            } else if info.subjects != wanted.subjects || info.replicas != wanted.replicas
                        || info.duplicateWindow != wanted.duplicateWindow || info.fileStorage != wanted.fileStorage {
                context.logger.warning("stream \(info.name) exists with other settings (subjects \(info.subjects.joined(separator: ", ")), \(info.replicas) replica(s), duplicate window \(DurationText.format(info.duplicateWindow)), \(info.fileStorage ? "file" : "memory")); left unchanged")
            }
        }
        guard let expected = configuration.expectStream else { return }
        guard let info = try await connection.streamInfo(expected) else {
            throw NATSSinkError("expect_stream: stream \(expected) does not exist (create it, or give \"stream\" to have locgate create it)")
        }
        let filter = configuration.subject.filter
        guard info.subjects.contains(where: { NATSSubject.isSubset(filter, of: $0) }) else {
            throw NATSSinkError("expect_stream: stream \(expected) captures \(info.subjects.joined(separator: ", ")), not the subject \(configuration.subject.text) (published as \(filter))")
        }
        if info.duplicateWindow == .zero {
            context.logger.warning("stream \(expected) has no duplicate window: re-sends after a crash are stored twice")
        }
        context.logger.info("publishing \(configuration.subject.text) into stream \(expected)")
    }

    private static func log(_ event: NATSConnectionEvent, logger: Logger, stats: ComponentStats) {
        switch event {
        case .connected(let url):
            logger.info("connected to \(url)")
        case .reconnected(let url):
            stats.count("nats.reconnects")
            logger.info("reconnected to \(url)")
        case .disconnected:
            stats.count("nats.disconnects")
            logger.warning("disconnected; publishing resumes after a reconnect")
        case .retrying(let round, let lastError, let delay):
            // Every round at first, then every tenth: a long outage must not flood the log.
            let level: LogLevel = round <= 3 || round % 10 == 0 ? .warning : .debug
            let why = lastError.isEmpty ? "no server answered" : lastError
            logger.log(level, "not connected (round \(round)): \(why); trying again in \(DurationText.format(delay))")
        case .asyncError(let text):
            stats.count("nats.async_errors")
            logger.error("server or client error: \(text)")
        case .closed(let lastError):
            if lastError.isEmpty {
                logger.debug("connection closed")
            } else {
                stats.count("nats.closed")
                logger.error("the client closed the connection: \(lastError)")
            }
        }
    }
}

/// A run-time failure of the NATS sink that retrying cannot fix.
public struct NATSSinkError: Error, CustomStringConvertible, Sendable {
    public var message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Hands outbox records to the connection and turns PubAcks into outbox answers.
final class NATSTransport: OutboxTransport {
    private let configuration: NATSSinkConfiguration
    private let context: ComponentContext
    /// The connection to publish on, once `prepare` passed: nothing is published before the
    /// stream was checked, nor while the supervisor replaces a closed connection.
    private let current = Locked<(connection: NATSConnection?, ready: Bool)>((nil, false))
    /// Core NATS: published records waiting for the flush that confirms them.
    private let flushing = Locked<FlushState>(FlushState())

    struct FlushState {
        var waiting: [@Sendable (OutboxAck) -> Void] = []
        var waiter: CheckedContinuation<Void, Never>?
    }

    init(configuration: NATSSinkConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    func attach(_ connection: NATSConnection) { current.withLock { $0 = (connection, false) } }

    func open() { current.withLock { $0.ready = true } }

    func detach() { current.withLock { $0 = (nil, false) } }

    func publish(_ record: OutboxRecord, retain: Bool, done: @escaping @Sendable (OutboxAck) -> Void) throws {
        let (c, ready) = current.withLock { $0 }
        guard let connection = c, ready else {
            throw NATSSinkError(c?.isConnected == true ? "checking the stream" : "not connected")
        }
        if configuration.jetstream {
            let subject = record.key, context = self.context, expected = configuration.expectStream
            try connection.publishAsync(subject: subject, payload: record.payload, messageID: record.id, expectStream: expected,
                                        ackTimeout: configuration.ackTimeout) { result in
                done(NATSTransport.answer(result, subject: subject, expected: expected, context: context))
            }
        } else {
            try connection.publish(subject: record.key, payload: record.payload)
            let waiter: CheckedContinuation<Void, Never>? = flushing.withLock { s in
                s.waiting.append(done)
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume()
        }
    }

    /// What a PubAck (or its absence) means for the record.
    static func answer(_ result: NATSPublishResult, subject: String, expected: String?, context: ComponentContext) -> OutboxAck {
        switch result {
        case .stored(let stream, _, let duplicate):
            if let expected, stream != expected {
                context.logger.error("subject \(subject) was stored in stream \(stream), not in expect_stream \(expected)")
                return .retry(reason: "stored in stream \(stream), expected \(expected)")
            }
            if duplicate { context.stats.count("nats.duplicates") }
            return .accepted
        case .timedOut:
            return .retry(reason: "no PubAck within ack_timeout")
        case .noResponders:
            context.stats.count("nats.no_responders")
            return .retry(reason: "no stream captures subject \(subject) (no responders)")
        case .refused(let code, let text):
            // 10054: larger than the stream's max_msg_size; sending it again cannot help.
            if code == 10054 { return .rejected(reason: "\(text) (JetStream error \(code))") }
            if code == 10060 { context.logger.error("subject \(subject): \(text); is expect_stream \(expected ?? "") right?") }
            return .retry(reason: "\(text) (JetStream error \(code))")
        case .abandoned(let why):
            return .retry(reason: why)
        }
    }

    /// Core NATS: flushes whenever records were published, then accepts them; runs until cancelled.
    func flushLoop() async throws {
        while true {
            try Task.checkCancellation()
            let batch = flushing.withLock { s in
                defer { s.waiting = [] }
                return s.waiting
            }
            if batch.isEmpty {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                        let now = flushing.withLock { s -> Bool in
                            if !s.waiting.isEmpty || Task.isCancelled { return true }
                            s.waiter = c
                            return false
                        }
                        if now { c.resume() }
                    }
                } onCancel: {
                    flushing.withLock { s in
                        defer { s.waiter = nil }
                        return s.waiter
                    }?.resume()
                }
                continue
            }
            do {
                guard let connection = current.withLock({ $0.connection }) else { throw NATSSinkError("not connected") }
                try await connection.flush(timeout: configuration.ackTimeout)
                for done in batch { done(.accepted) }
            } catch {
                // Some may have reached the server: core NATS re-sends may duplicate (documented).
                for done in batch { done(.retry(reason: "flush failed: \(error)")) }
            }
        }
    }
}
