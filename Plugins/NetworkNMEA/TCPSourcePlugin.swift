import GatewayCore
import Preflight

/// Configuration of the `tcp` source.
public struct TCPNMEAConfiguration: Sendable {
    public var host = ""
    public var port = 0
    /// Device id of every position; default `host:port`.
    public var device = ""
    public var requireChecksum = true
    /// No bytes for this long: drop the connection and reconnect.
    public var stallTimeout: Duration = .seconds(30)
    public var connectTimeout: Duration = .seconds(5)
    public var reconnectInitial: Duration = .milliseconds(500)
    public var reconnectMax: Duration = .seconds(30)
    /// Health events; nil for none.
    public var health: HealthConfiguration?
}

/// The `tcp` source: NMEA 0183 from a TCP server (multiplexers, phone apps, gpsd raw ports, socat bridges).
public enum TCPNMEAPlugin: SourcePlugin {
    public static let info = PluginInfo(
        type: "tcp", kind: .source,
        summary: "Reads NMEA 0183 from a TCP server (marine multiplexer, phone app, gpsd raw port, socat bridge); reconnects with backoff.",
        folder: "NetworkNMEA",
        options: [
            OptionSpec("host", "string", required: true, "Server name or address."),
            OptionSpec("port", "integer", required: true, "Server TCP port (1–65535)."),
            OptionSpec("device", "string", default: "\"<host>:<port>\"", "Device id given to every position."),
            OptionSpec("require_checksum", "boolean", default: "true", "Reject sentences without a *HH checksum."),
            OptionSpec("stall_timeout", "duration", default: "\"30s\"", "Reconnect when no bytes arrived for this long (at least 100ms)."),
            OptionSpec("connect_timeout", "duration", default: "\"5s\"", "Give up one connection attempt after this long."),
            OptionSpec("reconnect_initial", "duration", default: "\"500ms\"", "First wait before reconnecting; doubles after each failure (with 20% jitter)."),
            OptionSpec("reconnect_max", "duration", default: "\"30s\"", "Longest wait between reconnection attempts."),
        ] + HealthConfiguration.optionSpecs,
        sample: #"{ "type": "tcp", "host": "127.0.0.1", "port": 10110, "device": "boat-mux", "stall_timeout": "10s" }"#
    )

    public static func configure(_ options: inout OptionReader) -> TCPNMEAConfiguration {
        var c = TCPNMEAConfiguration()
        c.host = options.requiredString("host") ?? ""
        let port = options.optionalInt("port", in: 1...65535)
        if port == nil && !options.has("port") { options.report("port", "required option is missing") }
        c.port = port ?? 0
        c.device = options.string("device") ?? "\(c.host):\(c.port)"
        c.requireChecksum = options.bool("require_checksum", default: true)
        c.stallTimeout = options.duration("stall_timeout", default: .seconds(30), minimum: .milliseconds(100))
        c.connectTimeout = options.duration("connect_timeout", default: .seconds(5), minimum: .milliseconds(100))
        c.reconnectInitial = options.duration("reconnect_initial", default: .milliseconds(500), minimum: .milliseconds(10))
        c.reconnectMax = options.duration("reconnect_max", default: .seconds(30), minimum: .milliseconds(10))
        c.health = HealthConfiguration.read(&options)
        if c.reconnectMax < c.reconnectInitial {
            options.report("reconnect_max", "must be at least reconnect_initial (\(DurationText.format(c.reconnectInitial)))")
        }
        return c
    }

    public static func makeSource(_ configuration: TCPNMEAConfiguration, context: ComponentContext) throws -> any PositionSource {
        TCPNMEASource(configuration: configuration, context: context)
    }
}

extension TCPNMEAPlugin {
    /// The NMEA server should accept a connection; only a warning, since the source reconnects.
    public static func checkEnvironment(_ configuration: TCPNMEAConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        guard let problem = PeerCheck.tcpProblem(host: configuration.host, port: configuration.port, timeout: min(context.peerTimeout, configuration.connectTimeout)) else { return [] }
        return [context.warning("host", "the NMEA server is not reachable now: \(problem); the source retries until it is")]
    }
}
