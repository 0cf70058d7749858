import GatewayCore
import MQTTClient
import DeliveryEngine

/// Publishes positions to an MQTT broker from an outbox: one message per position.
///
///     SinkInput ──▶ OutboxSinkLoop: encode, commit, acknowledge ──▶ [outbox] ──▶ MQTTTransport ──▶ MQTTConnection (network thread)
///                                         ▲                                                              │
///                                         └──────── delete on PUBACK / PUBCOMP (done, by message id) ────┘
///
/// The payload and the topic are fixed when the position is committed (the topic is the
/// record's key), so a restart re-sends exactly what was queued. At most `max_inflight`
/// messages are unacknowledged on the wire (more wait in the connection's queue: ``handoffWindow(_:)``);
/// the connection reconnects on its own thread, and libmosquitto
/// re-sends what was in flight, so a dropped connection does not duplicate messages in the
/// outbox's order.
struct MQTTSink: PositionSink {
    let configuration: MQTTSinkConfiguration
    let context: ComponentContext
    let outbox: any Outbox
    let connection: MQTTConnection

    init(configuration: MQTTSinkConfiguration, context: ComponentContext) throws {
        self.configuration = configuration
        self.context = context
        var o = configuration.broker.connectionOptions(componentID: context.id)
        o.maxInflight = configuration.maxInflight
        if let status = configuration.status {
            o.will = .init(topic: status.topic, payload: Array(status.offline.utf8), qos: 1, retain: true)
            o.online = .init(topic: status.topic, payload: Array(status.online.utf8), qos: 1, retain: true)
        }
        connection = try MQTTConnection(options: o, logger: context.logger, stats: context.stats)
        outbox = try OutboxOptions.open(configuration.queue, context: context)
    }

    /// Records handed to the connection and not yet acknowledged: `max_inflight` of them are on the
    /// wire; the rest wait, in order, in the connection's queue, which its network thread hands
    /// to libmosquitto as PUBACKs arrive. Handing over one record per acknowledgement instead
    /// (a window of `max_inflight`) costs two thread hand-offs per message and caps the rate at
    /// a fraction of what the broker takes (benchmark: Benchmarks/mqtt_sink.sh).
    static func handoffWindow(_ maxInflight: Int) -> Int { max(maxInflight, 2_000) }

    func run(input: any SinkInput) async throws {
        if configuration.qos == 0 {
            context.logger.warning("qos 0: a position counts as delivered once written to the socket; a broker or network fault loses it")
        }
        // A clean exit closes the database (no WAL left behind) and the connection (offline status, DISCONNECT).
        defer { outbox.close() }
        connection.start()
        let loop = OutboxSinkLoop(outbox: outbox, mode: configuration.queue, context: context, window: Self.handoffWindow(configuration.maxInflight),
                                  retainNewestPerKey: configuration.retain == .last, statsPrefix: "mqtt",
                                  // Not slower than the connection's own retries: once it is back, publishing resumes soon.
                                  retryMax: configuration.broker.reconnectMax)
        let transport = MQTTTransport(connection: connection, qos: configuration.qos, retain: configuration.retain)
        let topic = configuration.topic
        let format = configuration.format
        do {
            try await loop.run(input: input, transport: transport) { p in
                var payload: [UInt8] = []
                payload.reserveCapacity(320)
                format.append(p, to: &payload)
                return OutboxEntry(id: p.id, key: topic.render(p), payload: payload, time: p.time?.milliseconds)
            }
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }
}

/// Hands outbox records to the connection: the record's key is its topic.
struct MQTTTransport: OutboxTransport {
    let connection: MQTTConnection
    let qos: Int
    let retain: MQTTSinkConfiguration.Retain

    func publish(_ record: OutboxRecord, retain newest: Bool, done: @escaping @Sendable (OutboxAck) -> Void) throws {
        let flag: Bool = switch retain {
        case .never: false
        case .always: true
        case .last: newest
        }
        do {
            try connection.publish(topic: record.key, payload: record.payload, qos: qos, retain: flag) { outcome in
                switch outcome {
                case .accepted: done(.accepted)
                case .rejected(let why): done(.rejected(reason: why))
                case .abandoned(let why): done(.retry(reason: why))
                }
            }
        } catch let e as MQTTError where e.isPermanent {
            // A message that can never go out must not block every one behind it.
            throw OutboxRejection(reason: e.description)
        }
    }
}
