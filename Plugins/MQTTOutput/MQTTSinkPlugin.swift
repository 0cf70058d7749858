import GatewayCore
import Outbox
#if canImport(Glibc)
import Glibc
#endif

/// The `mqtt` sink: one MQTT message per position from a durable outbox, deleted on the broker's acknowledgement.
public enum MQTTSinkPlugin: SinkPlugin {
    public static let info = PluginInfo(
        type: "mqtt", kind: .sink,
        summary: "Publishes one MQTT message per position (JSON or OwnTracks) from a durable queue; deletes each on the broker's PUBACK/PUBCOMP.",
        folder: "MQTTOutput",
        options: [
            OptionSpec("url", "string", required: true, "Broker: mqtt://host[:port] (default port 1883) or mqtts://host[:port] (TLS, default port 8883)."),
            OptionSpec("client_id", "string", default: "\"locgate-<host name>-<sink id>\"", "MQTT client id; stable across restarts so the broker keeps the session."),
            OptionSpec("clean_session", "boolean", default: "false", "Start a new session on every connect; false keeps it (MQTT 5: session expiry set to the maximum)."),
            OptionSpec("protocol", "\"5\" | \"3.1.1\"", default: "\"5\"", "MQTT version. With 5, a broker's refusal of a message (reason code ≥ 0x80, such as not authorised) dead-letters it; 3.1.1 brokers acknowledge refused messages silently."),
            OptionSpec("qos", "0 | 1 | 2", default: "1", "1: a position is deleted on PUBACK; 2: on PUBCOMP; 0: once written to the socket (lossy: a broker or network fault loses it)."),
            OptionSpec("topic", "string", default: "\"locgate/{device}\"", "Topic template: {device} (device id, else source id), {source}, {event} (enter, exit, dwell, or position); / + # and control characters in values become _."),
            OptionSpec("retain", "false | true | \"last\"", default: "false", "Retain flag; \"last\" retains only the newest queued position per topic, so a late subscriber gets the current fix, never an older one."),
            OptionSpec("body.format", "json | owntracks", default: "\"json\"", "json: the position object (gpsd TPV names, with id); owntracks: OwnTracks location/transition messages."),
            OptionSpec("status.topic", "string", required: true, "With status: topic of a retained online message published on every connect, and of the will (offline) the broker publishes when the connection dies."),
            OptionSpec("status.online", "string", default: "\"online\"", "Payload published (retained) on connect."),
            OptionSpec("status.offline", "string", default: "\"offline\"", "Payload of the will, and published before a clean disconnect."),
            OptionSpec("username", "string", default: "none", "User name; ${ENV} allowed."),
            OptionSpec("password", "string", default: "none", "Password; ${ENV} allowed."),
            OptionSpec("tls.ca_file", "path", default: "system CAs", "PEM file of the CA(s) that signed the broker's certificate."),
            OptionSpec("tls.cert_file", "path", default: "none", "PEM client certificate (with tls.key_file)."),
            OptionSpec("tls.key_file", "path", default: "none", "PEM private key of tls.cert_file (unencrypted)."),
            OptionSpec("tls.verify", "boolean", default: "true", "Verify the broker's certificate and host name; false accepts any (testing only)."),
            OptionSpec("keepalive", "duration", default: "\"60s\"", "MQTT keepalive: a dead connection is noticed within 1.5 times this."),
            OptionSpec("max_inflight", "integer", default: "100", "Messages published and not yet acknowledged (the broker's receive maximum may lower it)."),
            OptionSpec("reconnect_max", "duration", default: "\"10s\"", "Longest wait between connection attempts (backoff from 200ms, doubling, ±20% jitter)."),
        ] + OutboxOptions.specs,
        sample: #"{ "type": "mqtt", "inputs": ["receiver"], "url": "mqtts://broker.example.org:8883", "topic": "owntracks/fleet/{device}", "retain": "last", "body": { "format": "owntracks" }, "status": { "topic": "locgate/gw1/status" }, "username": "gw1", "password": "${MQTT_PASSWORD:-secret}", "queue": { "path": "mqtt.sqlite" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> MQTTSinkConfiguration {
        var c = MQTTSinkConfiguration()
        if let url = options.requiredString("url") {
            if let parsed = parseURL(url) {
                (c.useTLS, c.host, c.port) = parsed
            } else {
                options.report("url", "expected mqtt://host[:port] or mqtts://host[:port], got \"\(url)\"")
            }
        }
        if let id = options.string("client_id") {
            if id.isEmpty || id.utf8.count > 65_535 { options.report("client_id", "must be 1 to 65535 bytes") }
            c.clientID = id
        }
        c.cleanSession = options.bool("clean_session", default: false)
        c.protocolVersion = options.choice("protocol", ["5", "3.1.1"], default: "5")
        c.qos = options.int("qos", default: 1, in: 0...2)
        if let template = options.string("topic") {
            let (topic, problems) = MQTTTopic.compile(template)
            for p in problems { options.report("topic", p) }
            if let topic { c.topic = topic }
        }
        switch options.value("retain") {
        case nil, .bool(false)?: c.retain = .never
        case .bool(true)?: c.retain = .always
        case .string("last")?: c.retain = .last
        case let v?: options.report("retain", "expected false, true or \"last\", got \(v.jsonText)")
        }
        if var body = options.object("body") {
            c.format = MQTTPayloadFormat(rawValue: body.choice("format", ["json", "owntracks"], default: "json")) ?? .json
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
            let online = status.string("online", default: "online")
            let offline = status.string("offline", default: "offline")
            c.status = .init(topic: topic, online: online, offline: offline)
            status.finish()
        }
        c.username = options.string("username")
        c.password = options.string("password")
        if c.password != nil && c.username == nil { options.report("password", "given without username") }
        if var tls = options.object("tls") {
            c.caFile = readableFile(&tls, "ca_file")
            c.certFile = readableFile(&tls, "cert_file")
            c.keyFile = readableFile(&tls, "key_file")
            c.verify = tls.bool("verify", default: true)
            if tls.has("cert_file") != tls.has("key_file") {
                tls.report(tls.has("cert_file") ? "key_file" : "cert_file", "tls.cert_file and tls.key_file go together")
            }
            if !c.useTLS { tls.report("", "only used with an mqtts:// url") }
            tls.finish()
        }
        c.keepalive = options.duration("keepalive", default: .seconds(60), minimum: .seconds(5))
        if c.keepalive > .seconds(65_535) { options.report("keepalive", "must be at most 65535s (an MQTT limit)") }
        c.maxInflight = options.int("max_inflight", default: 100, in: 1...65_535)
        c.reconnectMax = options.duration("reconnect_max", default: .seconds(10), minimum: .milliseconds(200))
        c.queue = OutboxOptions.read(&options)
        return c
    }

    /// `mqtt://host[:port]` or `mqtts://host[:port]` (an optional trailing `/`).
    static func parseURL(_ url: String) -> (tls: Bool, host: String, port: Int)? {
        let lower = url.lowercased()
        let tls: Bool
        var rest: Substring
        if lower.hasPrefix("mqtt://") { tls = false; rest = url.dropFirst(7) } else if lower.hasPrefix("mqtts://") { tls = true; rest = url.dropFirst(8) } else { return nil }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        var host = rest
        var port = tls ? 8883 : 1883
        if rest.hasPrefix("[") {
            // [IPv6]:port
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()), (1...65_535).contains(p) else { return nil }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65_535).contains(p) else { return nil }
            host = rest[..<colon]
            port = p
        }
        guard !host.isEmpty, !host.contains(where: { $0 == "/" || $0 == "@" || $0 == " " || $0 == "?" }) else { return nil }
        return (tls, String(host), port)
    }

    /// A path that must name a readable file: checked now so `locgate validate` reports it.
    private static func readableFile(_ reader: inout OptionReader, _ key: String) -> String? {
        guard let path = reader.filePath(key) else { return nil }
        if access(path, R_OK) != 0 {
            reader.report(key, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        return path
    }

    public static func isDurable(_ configuration: MQTTSinkConfiguration) -> Bool {
        OutboxOptions.isDurable(configuration.queue)
    }

    public static func claims(of configuration: MQTTSinkConfiguration) -> [String] {
        OutboxOptions.claims(configuration.queue)
    }

    public static func makeSink(_ configuration: MQTTSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        try MQTTSink(configuration: configuration, context: context)
    }

    /// `locgate-<host name>-<sink id>`: the same on every start of this sink on this machine.
    static func defaultClientID(sinkID: String) -> String {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count - 1) == 0 ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "host"
        return "locgate-\(host)-\(sinkID)"
    }
}
