import GatewayCore
import SystemIO
import EnvironmentChecks

/// Configuration of the `gpsd` source.
public struct GpsdSourceConfiguration: Sendable {
    public enum Mode: String, Sendable, CaseIterable {
        /// gpsd's TPV/SKY reports.
        case json
        /// Raw NMEA relayed by gpsd, decoded by locgate's NMEA engine.
        case nmea
    }
    public var host = GpsdSourcePlugin.host.defaultValue
    public var port = GpsdSourcePlugin.port.defaultValue
    /// Watch only this gpsd device (a path such as `/dev/ttyACM0`); nil watches every device.
    public var device: String?
    public var mode = GpsdSourcePlugin.mode.defaultValue
    /// No bytes from gpsd for this long: reconnect.
    public var stallTimeout = GpsdSourcePlugin.stallTimeout.defaultValue
    /// Cap of the exponential reconnect delay.
    public var reconnectMax = GpsdSourcePlugin.reconnectMax.defaultValue
    /// Emit a device's open epoch after this long without a new report.
    public var idleFlush = GpsdSourcePlugin.idleFlush.defaultValue
    /// Health events per gpsd device; nil for none.
    public var health: HealthConfiguration?
    /// Stop watching between windows; nil watches all the time.
    public var dutyCycle: DutyCycleConfiguration?

    public init() {}
}

/// The `gpsd` source: a gpsd client.
public enum GpsdSourcePlugin: SourcePlugin {
    public static let host = Option("host", default: "127.0.0.1",
        "gpsd host name or address.")
    public static let port = Option("port", default: 2947, in: 1...65535,
        "gpsd TCP port.")
    public static let mode = Option("mode", default: GpsdSourceConfiguration.Mode.json,
        "json: gpsd's TPV/SKY reports; nmea: gpsd relays the receiver's NMEA and locgate assembles the epochs.")
    public static let stallTimeout = Option("stall_timeout", default: Duration.seconds(10), minimum: .milliseconds(500),
        "Reconnect when gpsd sends nothing for this long.")
    public static let reconnectMax = Option("reconnect_max", default: Duration.seconds(5), minimum: .milliseconds(10),
        "Longest wait between reconnect attempts (the delay doubles from 200 ms up to this).")
    public static let idleFlush = Option("idle_flush", default: Duration.seconds(1), minimum: .milliseconds(10),
        "Emit a device's last epoch after this long without a new report from it.")

    public static let info = PluginInfo(
        type: "gpsd", kind: .source,
        summary: "Reads positions from a gpsd daemon over TCP (TPV/SKY reports, or raw NMEA through locgate's NMEA engine).",
        folder: "GpsdInput",
        options: [
            host.spec,
            port.spec,
            OptionSpec("device", "string", default: "none (every device)", "Watch only this gpsd device path; in nmea mode also the device id of the positions."),
            mode.spec,
            stallTimeout.spec,
            reconnectMax.spec,
            idleFlush.spec,
        ] + HealthConfiguration.optionSpecs + DutyCycleConfiguration.optionSpecs(methods: false, summary: "Watches only during a window of on every every: between windows locgate sends ?WATCH={\"enable\":false} so gpsd can release the device (see Docs/Power-and-health.md)."),
        sample: #"{ "type": "gpsd", "host": "127.0.0.1", "port": 2947, "stall_timeout": "10s" }"#
    )

    public static func configure(_ options: inout OptionReader) -> GpsdSourceConfiguration {
        var c = GpsdSourceConfiguration()
        c.host = options.read(host)
        if c.host.isEmpty { options.report("host", "must not be empty") }
        c.port = options.read(port)
        c.device = options.string("device")
        if c.device?.isEmpty == true { options.report("device", "must not be empty (leave it out to watch every device)") }
        c.mode = options.read(mode)
        c.stallTimeout = options.read(stallTimeout)
        c.reconnectMax = options.read(reconnectMax)
        c.idleFlush = options.read(idleFlush)
        c.health = HealthConfiguration.read(&options)
        c.dutyCycle = DutyCycleConfiguration.read(&options, methods: false)
        if c.idleFlush >= c.stallTimeout {
            options.report("idle_flush", "must be shorter than stall_timeout (\(DurationText.format(c.stallTimeout)))")
        }
        return c
    }

    public static func makeSource(_ configuration: GpsdSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        GpsdPositionSource(configuration: configuration, context: context)
    }
}

extension GpsdSourcePlugin {
    /// gpsd should accept a connection; only a warning, since the source reconnects until it does.
    public static func checkEnvironment(_ configuration: GpsdSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        guard let problem = PeerCheck.tcpProblem(host: configuration.host, port: configuration.port, timeout: context.peerTimeout) else { return [] }
        return [context.warning("host", "gpsd is not reachable now: \(problem); the source retries until it is")]
    }
}
