import GatewayCore
import MQTTClient

/// Subscribes to topic filters at QoS 1 in a persistent session and emits one position per message.
///
///     broker ──▶ MQTTConnection (network thread) ──deliver──▶ MQTTMessageGate ──▶ run(): decode ──▶ emit { handled }
///                       ▲ PUBACK written when deliver returns        │ waits for the window (max_unacked)
///                       └────────────────────────────────────────────┘
///
/// A message is acknowledged to the broker (its PUBACK written) only when the gate lets the network
/// thread go on; see ``MQTTMessageGate`` for the rule and the README for the window it leaves.
struct MQTTSource: PositionSource {
    let configuration: MQTTSourceConfiguration
    let context: ComponentContext

    func run(output: SourceOutput) async throws {
        if configuration.broker.cleanSession {
            context.logger.warning("clean_session is true: messages published while locgate is away are not kept for it")
        }
        let connection = try MQTTConnection(options: configuration.broker.connectionOptions(componentID: context.id),
                                            logger: context.logger, stats: context.stats)
        let window = UnacknowledgedWindow(limit: configuration.maxUnacked)
        let gate = MQTTMessageGate(window: window)
        connection.subscribe(configuration.topics, qos: 1) { message in
            gate.deliver(message) ? .handled : .dropConnection
        }
        let decoder = MQTTMessageDecoder(format: configuration.format, device: configuration.device,
                                         maxBytes: configuration.maxMessageBytes, sourceID: context.id)
        let stats = context.stats
        connection.start()
        while let (sequence, message) = await gate.next() {
            stats.count("mqtt.messages")
            switch decoder.decode(topic: message.topic, payload: message.payload, sequence: sequence) {
            case .position(let p):
                await window.acquire(1)
                await output.emit([p]) {
                    window.release(1)
                    gate.handled()
                }
            case .skipped(let counter, let detail):
                stats.count(counter)
                stats.count("mqtt.skipped")
                // The first few are worth a look; after that the counters tell the story.
                if stats.value("mqtt.skipped") <= 5 {
                    context.logger.warning("message on \(message.topic.prefix(200)) skipped: \(detail)")
                }
            }
            stats.set("mqtt.unacked", window.outstanding)
            gate.taken(sequence)
        }
        gate.close()
        await connection.close()
        if Task.isCancelled { throw CancellationError() }
    }
}
