import GatewayCore
import TrackerProtocols

/// Configuration of the `teltonika` source.
public struct TeltonikaSourceConfiguration: Sendable, Hashable {
    public var common: TrackerSourceConfiguration
}

/// The `teltonika` source: Teltonika trackers (FMB, FMC, FMM, …) over TCP or UDP, Codec 8,
/// 8 Extended and 16; each frame's record count is answered only once all its records were
/// handled end to end.
public enum TeltonikaSourcePlugin: SourcePlugin {
    public static let udp = Option("udp", default: false,
        "Listen for UDP datagrams (the device's UDP mode) instead of TCP connections; the connection limits then do not apply.")

    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5027)
    static let maxFrameBytes = 16_384

    public static let info = PluginInfo(
        type: "teltonika", kind: .source,
        summary: "Teltonika trackers that connect to locgate (Codec 8, 8 Extended, 16; TCP or UDP); a frame's records are acknowledged to the device only once every sink took them over.",
        folder: "TrackerInput",
        options: TrackerSourceConfiguration.optionSpecs(defaultListen: defaultListen, maxFrameBytes: maxFrameBytes) + [
            udp.spec,
        ],
        sample: #"{ "type": "teltonika", "listen": "0.0.0.0:5027", "devices": { "356307042441013": "truck-7" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> TeltonikaSourceConfiguration {
        let useUDP = options.read(udp)
        return TeltonikaSourceConfiguration(common: .read(&options, defaultListen: defaultListen, maxFrameBytes: maxFrameBytes, udp: useUDP))
    }

    public static func claims(of configuration: TeltonikaSourceConfiguration) -> [String] { configuration.common.claims }

    /// Commands go on the devices' connections (over UDP none: a command to one is refused).
    public static func carriesCommands(_ configuration: TeltonikaSourceConfiguration) -> Bool { !configuration.common.udp }

    public static func checkEnvironment(_ configuration: TeltonikaSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        configuration.common.environmentFindings(context: context)
    }

    public static func makeSource(_ configuration: TeltonikaSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        let limits = TrackerLimits(maxFrameBytes: configuration.common.listener.maxFrameBytes)
        let transport: TeltonikaCodec.Transport = configuration.common.udp ? .udp : .tcp
        return configuration.common.makeSource(protocolName: "Teltonika", context: context) {
            TeltonikaCodec(transport: transport, limits: limits)
        }
    }
}
