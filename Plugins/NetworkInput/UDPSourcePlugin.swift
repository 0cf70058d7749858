import GatewayCore

/// Configuration of the `udp` source.
public struct UDPNMEAConfiguration: Sendable {
    public var bind = UDPNMEAPlugin.bind.defaultValue
    public var port = 0
    /// Device id of every position; nil: each sender's `address:port`.
    public var device: String?
    public var requireChecksum = UDPNMEAPlugin.requireChecksum.defaultValue
    public var maxSenders = UDPNMEAPlugin.maxSenders.defaultValue
    /// Health events (per sender device); nil for none.
    public var health: HealthConfiguration?
}

/// The `udp` source: NMEA 0183 (and UBX) datagrams from one sender or many.
public enum UDPNMEAPlugin: SourcePlugin {
    public static let bind = Option("bind", default: "0.0.0.0",
        "Local address to listen on (\"127.0.0.1\" for this machine only, \"::\" for IPv6).")
    public static let requireChecksum = Option("require_checksum", default: true,
        "Reject sentences without a *HH checksum.")
    public static let maxSenders = Option("max_senders", default: 256, in: 1...100_000,
        "Senders tracked at once (one decoder each); the longest-quiet one is forgotten first.")

    public static let info = PluginInfo(
        type: "udp", kind: .source,
        summary: "Listens for NMEA 0183 and u-blox UBX datagrams (one sender or many; each sender address is a device id).",
        folder: "NetworkInput",
        options: [
            bind.spec,
            OptionSpec("port", "integer", required: true, "UDP port to listen on (1–65535)."),
            OptionSpec("device", "string", default: "the sender's \"address:port\"", "Device id given to every position, whoever sent it."),
            requireChecksum.spec,
            maxSenders.spec,
        ] + HealthConfiguration.optionSpecs,
        sample: #"{ "type": "udp", "bind": "0.0.0.0", "port": 10110 }"#
    )

    public static func configure(_ options: inout OptionReader) -> UDPNMEAConfiguration {
        var c = UDPNMEAConfiguration()
        c.bind = options.read(bind)
        let port = options.optionalInt("port", in: 1...65535)
        if port == nil && !options.has("port") { options.report("port", "required option is missing") }
        c.port = port ?? 0
        c.device = options.string("device")
        c.requireChecksum = options.read(requireChecksum)
        c.maxSenders = options.read(maxSenders)
        c.health = HealthConfiguration.read(&options)
        return c
    }

    /// Two sources cannot listen on one port.
    public static func claims(of configuration: UDPNMEAConfiguration) -> [String] {
        ["udp port \(configuration.port)"]
    }

    public static func makeSource(_ configuration: UDPNMEAConfiguration, context: ComponentContext) throws -> any PositionSource {
        UDPNMEASource(configuration: configuration, context: context)
    }
}
