import DeviceIntake
import GatewayCore
import NMEA
import SystemIO
import TrackerProtocols
import EnvironmentChecks

/// Configuration of the `tcp` source.
public struct TCPNMEAConfiguration: Sendable {
    public var host = ""
    public var port = 0
    /// Device id of every position; default `host:port`.
    public var device = ""
    public var requireChecksum = TCPNMEAPlugin.requireChecksum.defaultValue
    /// No bytes for this long: drop the connection and reconnect.
    public var stallTimeout = TCPNMEAPlugin.stallTimeout.defaultValue
    public var connectTimeout = TCPNMEAPlugin.connectTimeout.defaultValue
    public var reconnectInitial = TCPNMEAPlugin.reconnectInitial.defaultValue
    public var reconnectMax = TCPNMEAPlugin.reconnectMax.defaultValue
    /// Health events; nil for none.
    public var health: HealthConfiguration?
    /// Listen mode (`listen`): devices and apps connect to locgate and push NMEA; nil for the
    /// client mode (`host`, `port`).
    public var listener: ListenerConfiguration?
    /// Listen mode: the first line a connection sends names its device (`device_from: "hello"`);
    /// otherwise the peer's address does.
    public var helloLine = TCPNMEAPlugin.deviceFrom.defaultValue
    /// Listen mode: who may send (everyone unless `devices` is given).
    public var directory = DeviceDirectoryConfiguration(acceptUnknown: true)
}

/// The `tcp` source: NMEA 0183 from a TCP server (multiplexers, phone apps, gpsd raw ports, socat bridges).
public enum TCPNMEAPlugin: SourcePlugin {
    public static let requireChecksum = Option("require_checksum", default: true,
        "Reject sentences without a *HH checksum.")
    public static let stallTimeout = Option("stall_timeout", default: Duration.seconds(30), minimum: .milliseconds(100),
        "Reconnect when no bytes arrived for this long (at least 100ms).")
    public static let connectTimeout = Option("connect_timeout", default: Duration.seconds(5), minimum: .milliseconds(100),
        "Give up one connection attempt after this long.")
    public static let reconnectInitial = Option("reconnect_initial", default: Duration.milliseconds(500), minimum: .milliseconds(10),
        "First wait before reconnecting; doubles after each failure (with 20% jitter).")
    public static let reconnectMax = Option("reconnect_max", default: Duration.seconds(30), minimum: .milliseconds(10),
        "Longest wait between reconnection attempts.")
    /// `device_from`, held as whether the hello line names the device.
    public static let deviceFrom = Option("device_from", spellings: (no: "peer", yes: "hello"), default: false,
        "Listen mode: a connection's device is its peer's IP address, or the first line it sends (a hello line such as \"boat-7\").")

    public static let info = PluginInfo(
        type: "tcp", kind: .source,
        summary: "Reads NMEA 0183 from a TCP server (marine multiplexer, phone app, gpsd raw port, socat bridge), reconnecting with backoff; or, with listen, from devices and apps that connect to locgate.",
        folder: "NetworkInput",
        options: [
            OptionSpec("host", "string", required: true, "Server name or address (client mode; not with listen)."),
            OptionSpec("port", "integer", required: true, "Server TCP port (1–65535) (client mode; not with listen)."),
            OptionSpec("device", "string", default: "\"<host>:<port>\"", "Device id given to every position."),
            requireChecksum.spec,
            stallTimeout.spec,
            connectTimeout.spec,
            reconnectInitial.spec,
            reconnectMax.spec,
        ] + HealthConfiguration.optionSpecs + [
            deviceFrom.spec,
        ] + ListenerConfiguration.optionSpecs(defaultListen: TCPNMEAPlugin.defaultListen, maxFrameBytes: 256, handshake: true).map(TCPNMEAPlugin.listenOnly)
          + DeviceDirectoryConfiguration.optionSpecs(identifier: "peer address or hello line").map(TCPNMEAPlugin.listenOnly),
        sample: #"{ "type": "tcp", "host": "127.0.0.1", "port": 10110, "device": "boat-mux", "stall_timeout": "10s" }"#
    )

    /// Where listen mode listens unless told (10110: the NMEA-over-TCP port of marine gear).
    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 10110)

    /// Options the client mode does not have.
    static let listenKeys = ["listen", "device_from", "max_connections", "max_connections_per_address", "handshake_timeout",
                             "idle_timeout", "max_frame_bytes", "max_unacked", "devices", "unknown_devices"]
    /// Options the listen mode does not have.
    static let clientKeys = ["host", "port", "device", "stall_timeout", "connect_timeout", "reconnect_initial", "reconnect_max", "health"]

    private static func listenOnly(_ spec: OptionSpec) -> OptionSpec {
        var s = spec
        if s.name == "max_frame_bytes" {
            s.summary = "Longest NMEA sentence accepted (longer ones are counted and skipped)."
        } else if s.name == "handshake_timeout" {
            s.summary = "With device_from \"hello\": a connection that sent no hello line within this is closed."
        } else if s.name == "devices" {
            s.summary = "Who may send: peer address or hello line → device name (or {\"name\", \"attributes\"}), inline or in a JSON file re-read when it changes. Without it every connection is accepted under its own address or hello line."
        }
        s.summary = "Listen mode: " + s.summary.prefix(1).lowercased() + s.summary.dropFirst()
        return s
    }

    public static func configure(_ options: inout OptionReader) -> TCPNMEAConfiguration {
        if options.has("listen") { return configureListener(&options) }
        for key in listenKeys where options.has(key) {
            options.report(key, "only used with listen (devices connect to locgate); this source connects to host:port")
        }
        var c = TCPNMEAConfiguration()
        c.host = options.requiredString("host") ?? ""
        let port = options.optionalInt("port", in: 1...65535)
        if port == nil && !options.has("port") { options.report("port", "required option is missing") }
        c.port = port ?? 0
        c.device = options.string("device") ?? "\(c.host):\(c.port)"
        c.requireChecksum = options.read(requireChecksum)
        c.stallTimeout = options.read(stallTimeout)
        c.connectTimeout = options.read(connectTimeout)
        c.reconnectInitial = options.read(reconnectInitial)
        c.reconnectMax = options.read(reconnectMax)
        c.health = HealthConfiguration.read(&options)
        if c.reconnectMax < c.reconnectInitial {
            options.report("reconnect_max", "must be at least reconnect_initial (\(DurationText.format(c.reconnectInitial)))")
        }
        return c
    }

    /// Listen mode: devices connect and push NMEA.
    private static func configureListener(_ options: inout OptionReader) -> TCPNMEAConfiguration {
        var c = TCPNMEAConfiguration()
        for key in clientKeys where options.has(key) {
            options.report(key, "only used with host and port (locgate connects to a server), not with listen\(key == "device" ? ": devices or device_from name the devices" : "")")
        }
        c.listener = ListenerConfiguration.read(&options, defaultListen: defaultListen, maxFrameBytes: 256)
        c.helloLine = options.read(deviceFrom)
        c.requireChecksum = options.read(requireChecksum)
        let listed = options.has("devices")
        c.directory = DeviceDirectoryConfiguration.read(&options, required: false)
        if !listed {
            if options.has("unknown_devices") && !c.directory.acceptUnknown {
                options.report("unknown_devices", "\"reject\" without devices would refuse every connection: list them in devices")
            }
            c.directory.acceptUnknown = true
        }
        return c
    }

    /// Two sources cannot listen on one port.
    public static func claims(of configuration: TCPNMEAConfiguration) -> [String] {
        configuration.listener?.claims ?? []
    }

    public static func makeSource(_ configuration: TCPNMEAConfiguration, context: ComponentContext) throws -> any PositionSource {
        guard let listener = configuration.listener else { return TCPNMEASource(configuration: configuration, context: context) }
        var options = NMEAOptions()
        options.requireChecksum = configuration.requireChecksum
        options.maxSentenceLength = listener.maxFrameBytes
        options.source = context.id
        let counters = NMEACounters(stats: context.stats)
        let hello = configuration.helloLine
        let decoding = options
        var byAddress: (@Sendable (SocketAddress) -> String?)?
        if !hello { byAddress = { address in address.host } }
        return ListeningSource(protocolName: "NMEA", transport: .tcp(listener), directory: configuration.directory, context: context,
                               identifyAtAccept: byAddress) { (_: SocketAddress) -> any TrackerCodec in
            NMEAStreamCodec(hello: hello, options: decoding, counters: counters)
        }
    }
}

extension TCPNMEAPlugin {
    /// The NMEA server should accept a connection; only a warning, since the source reconnects.
    public static func checkEnvironment(_ configuration: TCPNMEAConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        if let listener = configuration.listener {
            return configuration.directory.environmentFindings(context: context) + listener.environmentFindings(context: context)
        }
        guard let problem = PeerCheck.tcpProblem(host: configuration.host, port: configuration.port, timeout: min(context.peerTimeout, configuration.connectTimeout)) else { return [] }
        return [context.warning("host", "the NMEA server is not reachable now: \(problem); the source retries until it is")]
    }
}
