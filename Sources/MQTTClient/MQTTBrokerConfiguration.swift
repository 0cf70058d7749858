import GatewayCore
#if canImport(Glibc)
import Glibc
#endif

/// The connection options the mqtt sink and the mqtt source share: broker address, session,
/// credentials, TLS, keepalive, reconnection. Read from configuration by ``read(_:)``, turned
/// into ``MQTTConnectionOptions`` by ``connectionOptions(componentID:)``.
public struct MQTTBrokerConfiguration: Sendable, Equatable {
    public static let reconnectMaxOption = Option("reconnect_max", default: Duration.seconds(10), minimum: .milliseconds(200),
        "Longest wait between connection attempts (backoff from 200ms, doubling, ±20% jitter).")
    public static let cleanSessionOption = Option("clean_session", default: false,
        "Start a new session on every connect; false keeps it (MQTT 5: session expiry set to the maximum).")
    public static let keepaliveOption = Option("keepalive", default: Duration.seconds(60), minimum: .seconds(5),
        "MQTT keepalive: a dead connection is noticed within 1.5 times this.")

    /// `protocol`; `note` says what the version changes for the component.
    public static func protocolOption(note: String = "") -> Option<String> {
        Option("protocol", choices: ["5", "3.1.1"], quoted: true, default: "5", note.isEmpty ? "MQTT version." : "MQTT version. \(note)")
    }

    public var host = "127.0.0.1"
    public var port = 1883
    public var useTLS = false
    /// nil: `locgate-<host name>-<component id>`.
    public var clientID: String?
    public var cleanSession = MQTTBrokerConfiguration.cleanSessionOption.defaultValue
    /// `"5"` or `"3.1.1"`.
    public var protocolVersion = MQTTBrokerConfiguration.protocolOption().defaultValue
    public var username: String?
    public var password: String?
    /// Used with an mqtts:// url.
    public var tls = ClientTLSOptions()
    public var keepalive = MQTTBrokerConfiguration.keepaliveOption.defaultValue
    public var reconnectMax = MQTTBrokerConfiguration.reconnectMaxOption.defaultValue

    public init() {}

    /// The options that identify the broker and the session, in the order the READMEs list them.
    public static func sessionSpecs(component: String, protocolNote: String) -> [OptionSpec] {
        [
            OptionSpec("url", "string", required: true, "Broker: mqtt://host[:port] (default port 1883) or mqtts://host[:port] (TLS, default port 8883)."),
            OptionSpec("client_id", "string", default: "\"locgate-<host name>-<\(component) id>\"", "MQTT client id; stable across restarts so the broker keeps the session."),
            cleanSessionOption.spec,
            protocolOption(note: protocolNote).spec,
        ]
    }

    /// Credentials, TLS and keepalive, in the order the READMEs list them.
    public static let securitySpecs: [OptionSpec] = [
        OptionSpec("username", "string", default: "none", "User name; ${ENV} allowed."),
        OptionSpec("password", "string", default: "none", "Password; ${ENV} allowed."),
    ] + ClientTLSOptions.specs(peer: "the broker") + [
        keepaliveOption.spec,
    ]

    public static var reconnectSpec: OptionSpec { reconnectMaxOption.spec }

    /// Reads the ``sessionSpecs(component:protocolNote:)`` options.
    public mutating func readSession(_ options: inout OptionReader) {
        if let url = options.requiredString("url") {
            Redaction.registerCredentials(inURL: url)
            if let parsed = MQTTBrokerConfiguration.parseURL(url) {
                (useTLS, host, port) = parsed
            } else {
                options.report("url", "expected mqtt://host[:port] or mqtts://host[:port], got \"\(url)\"")
            }
        }
        if let id = options.string("client_id") {
            if id.isEmpty || id.utf8.count > 65_535 { options.report("client_id", "must be 1 to 65535 bytes") }
            clientID = id
        }
        cleanSession = options.read(Self.cleanSessionOption)
        protocolVersion = options.read(Self.protocolOption())
    }

    /// Reads the ``securitySpecs`` options.
    public mutating func readSecurity(_ options: inout OptionReader) {
        username = options.string("username")
        password = options.secretString("password")
        if password != nil && username == nil { options.report("password", "given without username") }
        if var tls = options.object("tls") {
            self.tls = ClientTLSOptions.read(&tls, checkFiles: true)
            if !useTLS { tls.report("", "only used with an mqtts:// url") }
            tls.finish()
        }
        keepalive = options.read(Self.keepaliveOption)
        if keepalive > .seconds(65_535) { options.report("keepalive", "must be at most 65535s (an MQTT limit)") }
    }

    /// Reads ``reconnectSpec``.
    public mutating func readReconnect(_ options: inout OptionReader) {
        reconnectMax = options.read(Self.reconnectMaxOption)
    }

    /// `mqtt://host:port` or `mqtts://…`, for log lines.
    public var displayURL: String { "\(useTLS ? "mqtts" : "mqtt")://\(host):\(port)" }

    /// The libmosquitto options of this configuration for the component `componentID`.
    public func connectionOptions(componentID: String) -> MQTTConnectionOptions {
        var o = MQTTConnectionOptions()
        o.host = host
        o.port = port
        o.clientID = clientID ?? MQTTBrokerConfiguration.defaultClientID(componentID: componentID)
        o.cleanSession = cleanSession
        o.protocolVersion = protocolVersion == "3.1.1" ? .v311 : .v5
        o.keepalive = Int(keepalive.milliseconds / 1000)
        o.username = username
        o.password = password
        if useTLS { o.tls = tls }
        o.reconnectMax = reconnectMax
        o.displayURL = displayURL
        return o
    }

    /// `mqtt://host[:port]` or `mqtts://host[:port]` (an optional trailing `/`).
    public static func parseURL(_ url: String) -> (tls: Bool, host: String, port: Int)? {
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

    /// `locgate-<host name>-<component id>`: the same on every start of this component on this machine.
    public static func defaultClientID(componentID: String) -> String {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count - 1) == 0 ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "host"
        return "locgate-\(host)-\(componentID)"
    }
}
