import GatewayCore
import MQTTClient
import SystemIO
import EnvironmentChecks

/// The `mqtt` source: topic filters at QoS 1 in a persistent session, OwnTracks or locgate JSON.
public enum MQTTSourcePlugin: SourcePlugin {
    public static let format = Option("format", default: MQTTSourceConfiguration.Format.auto,
        "json: a locgate position object (gpsd TPV names); owntracks: OwnTracks messages, _type location becomes a position, other types are skipped; auto: owntracks when the object has a _type, else json.")
    public static let maxUnacked = Option("max_unacked", default: 1, in: 1...100_000,
        "Positions emitted and not yet handled by every sink. 1: no message is acknowledged to the broker before its position is handled; N: up to N − 1 acknowledged messages may still be in the pipeline (lost if locgate crashes), for throughput.")
    public static let maxMessageBytes = Option("max_message_bytes", default: 65_536, in: 1024...268_435_455,
        "Larger messages are counted (mqtt.skipped.too_large) and skipped.")

    public static let info = PluginInfo(
        type: "mqtt", kind: .source,
        summary: "Subscribes to MQTT topic filters at QoS 1 in a persistent session; reads OwnTracks locations or locgate JSON positions, one per message.",
        folder: "MQTTInput",
        options: MQTTBrokerConfiguration.sessionSpecs(component: "source", protocolNote: "With 5, retained messages are sent only for a subscription the session did not have yet.") + [
            OptionSpec("topics", "array of strings", required: true, "Topic filters (+ and # wildcards), subscribed at QoS 1, e.g. [\"owntracks/+/+\"]."),
            format.spec,
            OptionSpec("device", "string", default: "the topic's last two levels", "Device id template over the topic: {1}, {2} … levels from the start, {-1}, {-2} … from the end; replaces a json position's own device."),
            maxUnacked.spec,
            maxMessageBytes.spec,
        ] + MQTTBrokerConfiguration.securitySpecs + [MQTTBrokerConfiguration.reconnectSpec],
        sample: #"{ "type": "mqtt", "url": "mqtts://broker.example.org:8883", "client_id": "locgate-fleet", "topics": ["owntracks/+/+"], "format": "owntracks", "username": "locgate", "password": "${MQTT_PASSWORD:-secret}" }"#
    )

    public static func configure(_ options: inout OptionReader) -> MQTTSourceConfiguration {
        var c = MQTTSourceConfiguration()
        c.broker.readSession(&options)
        if let topics = options.stringArray("topics") {
            if topics.isEmpty { options.report("topics", "must list at least one topic filter") }
            for t in topics {
                if let problem = filterProblem(t) { options.report("topics", "\"\(t.prefix(100))\": \(problem)") }
            }
            c.topics = topics
        } else if !options.has("topics") {
            options.report("topics", "missing (a list of topic filters such as [\"owntracks/+/+\"])")
        }
        c.format = options.read(format)
        if let template = options.string("device") {
            let (compiled, problems) = MQTTDeviceTemplate.compile(template)
            for p in problems { options.report("device", p) }
            c.device = compiled
        }
        c.maxUnacked = options.read(maxUnacked)
        c.maxMessageBytes = options.read(maxMessageBytes)
        c.broker.readSecurity(&options)
        c.broker.readReconnect(&options)
        return c
    }

    /// Why `filter` is not a valid MQTT topic filter, or nil.
    static func filterProblem(_ filter: String) -> String? {
        if filter.isEmpty { return "must not be empty" }
        if filter.utf8.count > 65_535 { return "is too long for an MQTT topic filter" }
        if filter.unicodeScalars.contains(where: { $0.value == 0 }) { return "must not contain NUL" }
        let levels = filter.split(separator: "/", omittingEmptySubsequences: false)
        for (i, level) in levels.enumerated() {
            if level.contains("#") && (level != "#" || i != levels.count - 1) { return "# must be a whole level and the last one" }
            if level.contains("+") && level != "+" { return "+ must be a whole level" }
        }
        return nil
    }

    public static func makeSource(_ configuration: MQTTSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        MQTTSource(configuration: configuration, context: context)
    }
}

extension MQTTSourcePlugin {
    /// The broker should accept a TCP connection: a warning only, since the client reconnects.
    public static func checkEnvironment(_ configuration: MQTTSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings: [EnvironmentFinding] = []
        if let problem = PeerCheck.tcpProblem(host: configuration.broker.host, port: configuration.broker.port, timeout: context.peerTimeout) {
            findings.append(context.warning("url", "the broker is not reachable now: \(problem); the client reconnects until it is"))
        }
        return findings
    }
}
