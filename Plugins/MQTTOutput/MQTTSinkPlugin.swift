import GatewayCore
import MQTTClient
import DeliveryEngine
import PositionEncoding
import SystemIO
import EnvironmentChecks

/// The `mqtt` sink: one MQTT message per position from a durable outbox, deleted on the broker's acknowledgement.
public enum MQTTSinkPlugin: SinkPlugin {
    public static let qos = Option("qos", default: 1, in: 0...2, typeName: "0 | 1 | 2",
        "1: a position is deleted on PUBACK; 2: on PUBCOMP; 0: once written to the socket (lossy: a broker or network fault loses it).")
    public static let topic = Option("topic", default: MQTTTopic.compiled("locgate/{device}"), typeName: "string",
        "Topic template: {device} (device id, else source id), {source}, {event} (enter, exit, dwell, or position); / + # and control characters in values become _.",
        jsonText: { OptionText.string($0.template) },
        read: { key, reader in
            guard let template = reader.string(key) else { return nil }
            let (topic, problems) = MQTTTopic.compile(template)
            for p in problems { reader.report(key, p) }
            return topic
        })
    public static let retain = Option("retain", default: MQTTSinkConfiguration.Retain.never, typeName: "false | true | \"last\"",
        "Retain flag; \"last\" retains only the newest queued position per topic, so a late subscriber gets the current fix, never an older one.",
        jsonText: { retain in
            switch retain {
            case .never: "false"
            case .always: "true"
            case .last: OptionText.string("last")
            }
        },
        read: { key, reader in
            switch reader.value(key) {
            case nil: return nil
            case .bool(false)?: return .never
            case .bool(true)?: return .always
            case .string("last")?: return .last
            case let v?:
                reader.report(key, "expected false, true or \"last\", got \(v.jsonText)")
                return nil
            }
        })
    public static let bodyFormat = Option("body.format", choices: ["json", "owntracks", "template"], default: "json",
        "json: the position object (gpsd TPV names, with id); owntracks: OwnTracks location/transition messages; template: body.template with the one position at \"$positions\".")
    public static let statusOnline = Option("status.online", default: "online",
        "Payload published (retained) on connect.")
    public static let statusOffline = Option("status.offline", default: "offline",
        "Payload of the will, and published before a clean disconnect.")
    public static let maxInflight = Option("max_inflight", default: 100, in: 1...65_535,
        "Messages published and not yet acknowledged on the wire (the broker's receive maximum may lower it); up to 2000 more wait, in queue order, in the client library.")

    public static let info = PluginInfo(
        type: "mqtt", kind: .sink,
        summary: "Publishes one MQTT message per position (JSON or OwnTracks) from a durable queue; deletes each on the broker's PUBACK/PUBCOMP.",
        folder: "MQTTOutput",
        options: MQTTBrokerConfiguration.sessionSpecs(component: "sink", protocolNote: "With 5, a broker's refusal of a message (reason code ≥ 0x80, such as not authorised) dead-letters it; 3.1.1 brokers acknowledge refused messages silently.") + [
            qos.spec,
            topic.spec,
            retain.spec,
            bodyFormat.spec,
            OptionSpec("body.template", "JSON", default: "\"$positions\"", "template: the JSON document published; the string \"$positions\" stands for the message's one position (an object, not an array). Strings may use ${ENV}."),
            OptionSpec("body.fields", "object", default: "whole position object", "template: output field name → source field (\"lat\") or {\"from\", \"time_format\", \"zone\", \"scale\", \"decimals\"} or {\"value\": constant}, as in the http sink."),
            OptionSpec("status.topic", "string", required: true, "With status: topic of a retained online message published on every connect, and of the will (offline) the broker publishes when the connection dies."),
            statusOnline.spec,
            statusOffline.spec,
        ] + MQTTBrokerConfiguration.securitySpecs + [
            maxInflight.spec,
            MQTTBrokerConfiguration.reconnectSpec,
        ] + OutboxOptions.specs,
        sample: #"{ "type": "mqtt", "inputs": ["receiver"], "url": "mqtts://broker.example.org:8883", "topic": "owntracks/fleet/{device}", "retain": "last", "body": { "format": "owntracks" }, "status": { "topic": "locgate/gw1/status" }, "username": "gw1", "password": "${MQTT_PASSWORD:-secret}", "queue": { "path": "mqtt.sqlite" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> MQTTSinkConfiguration {
        var c = MQTTSinkConfiguration()
        c.broker.readSession(&options)
        c.qos = options.read(qos)
        c.topic = options.read(topic)
        c.retain = options.read(retain)
        if var body = options.object("body") {
            switch body.read(bodyFormat) {
            case "owntracks": c.format = .owntracks
            case "template": c.format = .template(BodyTemplate.read(&body))
            default: c.format = .json
            }
            if case .template = c.format {} else { BodyTemplate.reportUnused(&body, format: "template") }
            body.finish()
        }
        if var status = options.object("status") {
            let topic = status.requiredString("topic") ?? ""
            if !topic.isEmpty {
                let (compiled, problems) = MQTTTopic.compile(topic)
                for p in problems { status.report("topic", p) }
                if compiled?.parts.contains(where: { $0 != .literal(topic) }) == true {
                    status.report("topic", "is one fixed topic: {…} placeholders have no position to take values from")
                }
            }
            let online = status.read(statusOnline)
            let offline = status.read(statusOffline)
            c.status = .init(topic: topic, online: online, offline: offline)
            status.finish()
        }
        c.broker.readSecurity(&options)
        c.maxInflight = options.read(maxInflight)
        c.broker.readReconnect(&options)
        c.queue = OutboxOptions.read(&options)
        return c
    }

    public static func makeSink(_ configuration: MQTTSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        try MQTTSink(configuration: configuration, context: context)
    }
}

extension MQTTSinkPlugin {
    /// The broker should accept a TCP connection: a warning only, since the client reconnects.
    public static func checkEnvironment(_ configuration: MQTTSinkConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings: [EnvironmentFinding] = []
        findings += OutboxOptions.checkEnvironment(configuration.queue, context: context)
        if let problem = PeerCheck.tcpProblem(host: configuration.broker.host, port: configuration.broker.port, timeout: context.peerTimeout) {
            findings.append(context.warning("url", "the broker is not reachable now: \(problem); the client reconnects until it is"))
        }
        return findings
    }
}
