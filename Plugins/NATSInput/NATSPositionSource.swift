import GatewayCore
import Locking
import NATSClient
import Synchronization

/// A fault that retrying cannot fix (the consumer exists with the wrong kind of acks).
struct NATSSourceError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// The stream is not there yet (the gateways' nats sink may create it): retried with backoff.
struct StreamMissing: Error, CustomStringConvertible {
    var description: String
}

/// Reads positions from NATS.
///
///     fetch ≤ batch ──▶ decode ──▶ emit(positions) { ack those messages } ──▶ transforms, sinks
///        ▲                 │                                    │
///        │                 └─ bad / already handled: term / ack at once   │
///        └──── UnacknowledgedWindow (max_unacked) ◀── released when handled ┘
///
/// - JetStream: a durable pull consumer with explicit acks. A message is acknowledged only in
///   the emit's completion, which the runtime calls once every sink took the position over (or
///   a transform dropped it). A message never acknowledged (a crash, a shutdown that lost it)
///   is delivered again after `ack_wait`; a message whose position (device and id) was handled
///   recently, delivered again or stored twice, is acknowledged and dropped.
/// - Bad messages (not JSON, not a position, no coordinates, too large) are counted, terminated
///   (`+TERM`: never delivered again) and skipped.
/// - Acks go through whichever connection is current: a reply subject stays valid across reconnects.
/// - Core NATS (`jetstream: false`): a plain subscription; nothing to acknowledge.
struct NATSPositionSource: PositionSource {
    let configuration: NATSSourceConfiguration
    let context: ComponentContext

    /// A position is well under 1 KiB: a message above this is not one (and parsing it would
    /// cost for nothing).
    static let maxMessageBytes = 1 << 20
    /// A fetch waits this long for messages: short, so cancellation is noticed soon; an idle
    /// consumer costs one pull request per interval.
    static let fetchWait: Duration = .seconds(1)
    /// Ids remembered to drop redeliveries of handled positions (about 100 bytes each).
    static let recentIDs = 100_000

    func run(output: SourceOutput) async throws {
        var named = configuration.connection
        named.name = "locgate \(context.id)"
        let options = named
        let current = CurrentConnection()
        let window = UnacknowledgedWindow(limit: configuration.maxUnacked)
        let recent = RecentIDs(capacity: Self.recentIDs)
        var backoff = Backoff(initial: options.reconnectInitial, cap: options.reconnectMax)
        var decoder = MessageDecoder(context: context)
        let logger = context.logger, stats = context.stats
        defer { current.retire() }
        while true {
            try Task.checkCancellation()
            let connection = try await NATSConnection.connect(options, jetStream: configuration.jetstream ? NATSJetStreamSettings() : nil) { event in
                NATSPositionSource.log(event, logger: logger, stats: stats)
            }
            current.set(connection)
            do {
                try await connection.waitUntilConnected()
                if configuration.jetstream {
                    try await consume(connection, output: output, current: current, window: window, recent: recent,
                                      decoder: &decoder, backoff: &backoff)
                } else {
                    try await subscribe(connection, output: output, decoder: &decoder, backoff: &backoff)
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as NATSSourceError {
                throw error
            } catch {
                context.stats.count("nats.errors")
                logger.warning("\(error)")
            }
            // The connection stays open for acknowledgements still to come; it closes when the
            // last of them is done with it.
            current.set(nil)
            let delay = backoff.next()
            logger.warning("connecting again in \(DurationText.format(delay))")
            try await context.clock.sleep(for: delay)
        }
    }

    // MARK: - JetStream

    /// Creates (or finds) the consumer, then fetches until cancelled; returns or throws to reconnect.
    private func consume(_ connection: NATSConnection, output: SourceOutput, current: CurrentConnection, window: UnacknowledgedWindow,
                         recent: RecentIDs, decoder: inout MessageDecoder, backoff: inout Backoff) async throws {
        let wanted = NATSConsumerConfig(stream: configuration.stream, durable: configuration.consumer, filterSubject: configuration.filterSubject,
                                        deliver: configuration.deliver, maxAckPending: configuration.maxAckPending, ackWait: configuration.ackWait)
        let info: NATSConsumerInfo
        do {
            let (found, created) = try await connection.createConsumer(wanted)
            info = found
            if created {
                context.logger.info("created consumer \(found.name) on stream \(found.stream) (filter \(found.filterSubject ?? "none"), ack wait \(DurationText.format(found.ackWait)), max ack pending \(found.maxAckPending))")
            }
        } catch let error as NATSError where error.isNotFound {
            throw StreamMissing(description: "stream \(configuration.stream) does not exist (yet): \(error)")
        }
        guard info.pull, info.explicitAck else {
            throw NATSSourceError("consumer \(info.name) of stream \(info.stream) exists as a \(info.pull ? "pull" : "push") consumer with \(info.explicitAck ? "explicit" : "no per-message") acks; locgate needs a pull consumer with explicit acks: delete it or name another")
        }
        if info.filterSubject != configuration.filterSubject || info.ackWait != configuration.ackWait || info.maxAckPending != configuration.maxAckPending {
            context.logger.warning("consumer \(info.name) exists with other settings (filter \(info.filterSubject ?? "none"), ack wait \(DurationText.format(info.ackWait)), max ack pending \(info.maxAckPending)); used unchanged")
        }
        let subscription = try await connection.pullSubscribe(stream: configuration.stream, consumer: configuration.consumer, filterSubject: info.filterSubject)
        context.logger.info("consuming \(info.stream)/\(info.name): \(info.numPending) waiting, \(info.numAckPending) delivered and not acknowledged")
        if info.numAckPending > 0 {
            // Delivered to an earlier run (a crash) and never acknowledged: the server delivers
            // them again only after ack_wait, and would hand out newer messages first. A device's
            // positions must stay in order (geofence, distance filter), so fetch once they are due.
            context.logger.info("waiting \(DurationText.format(info.ackWait)) (ack_wait) for \(info.numAckPending) unacknowledged message(s) of an earlier run to be delivered again, in order")
            context.stats.count("nats.restart_waits")
            try await context.clock.sleep(for: info.ackWait)
        }
        do {
            try await fetchLoop(subscription, connection: connection, output: output, current: current, window: window,
                                recent: recent, decoder: &decoder, backoff: &backoff)
        } catch {
            // Unsubscribing leaves the durable consumer, with its acknowledgements, on the server.
            await subscription.close()
            throw error
        }
    }

    private func fetchLoop(_ subscription: NATSSubscription, connection: NATSConnection, output: SourceOutput, current: CurrentConnection,
                           window: UnacknowledgedWindow, recent: RecentIDs, decoder: inout MessageDecoder, backoff: inout Backoff) async throws {
        let stats = context.stats
        let ask = min(configuration.batch, configuration.maxUnacked)
        var failures = 0
        while true {
            try Task.checkCancellation()
            await window.acquire(ask)
            let messages: [NATSReceivedMessage]
            do {
                messages = try await subscription.fetch(batch: ask, timeout: Self.fetchWait)
            } catch {
                window.release(ask)
                try Task.checkCancellation()
                if let e = error as? NATSError, e.isNotFound || e.jetStreamCode == 10014 { throw e }
                failures += 1
                // Disconnected, a leader election: the library reconnects; wait for it.
                if failures >= 30 { throw error }
                if failures <= 3 || failures % 10 == 0 { context.logger.warning("fetch: \(error)") }
                try await connection.waitUntilConnected()
                try await context.clock.sleep(for: .milliseconds(200))
                continue
            }
            failures = 0
            if messages.isEmpty {
                window.release(ask)
                continue
            }
            backoff.reset()
            stats.count("nats.messages", by: messages.count)
            var batch = decoder.decode(messages)
            // Already taken over by every sink: drop. A redelivery (its ack was lost), but also a
            // first delivery of a position whose publisher gave it its id: after a consumer's
            // leader moves, JetStream delivers what was in flight again with a delivery count of
            // 1, and a publisher that re-sent a position after the stream's duplicate window
            // stored it twice. An id made up here (device and fix time) is checked only on a
            // redelivery: two distinct positions can share it.
            var keep: [Int] = []
            var duplicates: [NATSAckToken] = []
            for (i, m) in batch.sources.enumerated() {
                let redelivered = (m.deliveries ?? 1) > 1
                if redelivered { stats.count("nats.redelivered") }
                if redelivered || m.idGiven, recent.contains(batch.keys[i]) {
                    if let t = m.ackToken { duplicates.append(t) }
                    continue
                }
                keep.append(i)
            }
            if !duplicates.isEmpty {
                stats.count("nats.duplicates_dropped", by: duplicates.count)
                connection.acknowledge(duplicates, .ack)
            }
            if !batch.bad.isEmpty { connection.acknowledge(batch.bad, .term) }
            if keep.count != batch.positions.count {
                batch.positions = keep.map { batch.positions[$0] }
                batch.keys = keep.map { batch.keys[$0] }
                batch.sources = keep.map { batch.sources[$0] }
            }
            window.release(ask - batch.positions.count)
            guard !batch.positions.isEmpty else { continue }
            let tokens = batch.sources.compactMap(\.ackToken)
            let keys = batch.keys
            let n = batch.positions.count
            await output.emit(batch.positions) {
                // The pipeline took them over: only now may the broker forget them.
                recent.insert(keys)
                let failed = current.acknowledge(tokens)
                stats.count("nats.acked", by: tokens.count - failed)
                if failed > 0 { stats.count("nats.ack_failures", by: failed) }
                window.release(n)
            }
        }
    }

    // MARK: - Core NATS

    private func subscribe(_ connection: NATSConnection, output: SourceOutput, decoder: inout MessageDecoder, backoff: inout Backoff) async throws {
        let subscription = try connection.subscribe(subject: configuration.subject, pendingLimit: max(65_536, configuration.batch * 4))
        context.logger.info("subscribed to \(configuration.subject) (core NATS: nothing is acknowledged)")
        do {
            try await receiveLoop(subscription, output: output, decoder: &decoder, backoff: &backoff)
        } catch {
            await subscription.close()
            throw error
        }
    }

    private func receiveLoop(_ subscription: NATSSubscription, output: SourceOutput, decoder: inout MessageDecoder, backoff: inout Backoff) async throws {
        while true {
            try Task.checkCancellation()
            let messages = try await subscription.next(max: configuration.batch, timeout: Self.fetchWait)
            context.stats.set("nats.slow_consumer_dropped", Int(subscription.dropped), kind: .counter)
            if messages.isEmpty { continue }
            backoff.reset()
            context.stats.count("nats.messages", by: messages.count)
            let batch = decoder.decode(messages)
            await output.emit(batch.positions)
        }
    }

    // MARK: - Logging

    static func log(_ event: NATSConnectionEvent, logger: Logger, stats: ComponentStats) {
        switch event {
        case .connected(let url): logger.info("connected to \(url)")
        case .reconnected(let url):
            stats.count("nats.reconnects")
            logger.info("reconnected to \(url)")
        case .disconnected: logger.warning("disconnected; reconnecting")
        case .retrying(let round, let lastError, let delay):
            if round <= 3 || round % 10 == 0 {
                logger.warning("no server answered (round \(round)\(lastError.isEmpty ? "" : ": \(lastError)")); next try in \(DurationText.format(delay))")
            }
        case .asyncError(let text):
            stats.count("nats.async_errors")
            logger.warning("server or client error: \(text)")
        case .closed(let lastError):
            if !lastError.isEmpty { logger.warning("connection closed: \(lastError)") }
        }
    }
}

/// The connection acknowledgements go through: the newest one. Completions run on other tasks,
/// possibly after a reconnect replaced the connection or after the source ended.
final class CurrentConnection: Sendable {
    private let connection = Locked<NATSConnection?>(nil)
    private let retired = Atomic<Bool>(false)

    func set(_ c: NATSConnection?) {
        // Once the source ended, a new connection is not kept (nothing would close it).
        guard !retired.load(ordering: .acquiring) else { return }
        connection.withLock { $0 = c }
    }

    /// Returns how many acks could not be sent (no connection, or the client refused them).
    func acknowledge(_ tokens: [NATSAckToken]) -> Int {
        guard let c = connection.withLock({ $0 }) else { return tokens.count }
        return c.acknowledge(tokens, .ack)
    }

    /// The source ended: keep the connection for completions still to come; it is freed (and
    /// closed, flushing the last acks) when the last of them releases this object.
    func retire() { retired.store(true, ordering: .releasing) }
}
