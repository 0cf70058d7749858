import GatewayCore
import TrackerProtocols

/// Configuration of the `h02` source.
public struct H02SourceConfiguration: Sendable, Hashable {
    public var common: TrackerSourceConfiguration
    /// Answer every position sentence (`R12`) once it was handled end to end.
    public var acknowledge = H02SourcePlugin.acknowledge.defaultValue
}

/// The `h02` source: H02 / Sinotrack trackers (`*HQ,…#` text and `$` binary frames).
public enum H02SourcePlugin: SourcePlugin {
    public static let acknowledge = Option("ack", default: false,
        "Answer every position sentence with *HQ,<id>,R12,<time># once it was handled end to end (most H02 devices expect no answer; V1 sentences are always answered with V4).")

    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5013)
    static let maxFrameBytes = 1_024

    public static let info = PluginInfo(
        type: "h02", kind: .source,
        summary: "H02 / Sinotrack trackers that connect to locgate (*HQ text and $ binary frames); answers, where the protocol has them, only once every sink took the positions over.",
        folder: "TrackerInput",
        options: TrackerSourceConfiguration.optionSpecs(defaultListen: defaultListen, maxFrameBytes: maxFrameBytes) + [
            acknowledge.spec,
        ],
        sample: #"{ "type": "h02", "listen": "0.0.0.0:5013", "devices": { "4209134133": "scooter-3" }, "ack": true }"#
    )

    public static func configure(_ options: inout OptionReader) -> H02SourceConfiguration {
        var c = H02SourceConfiguration(common: .read(&options, defaultListen: defaultListen, maxFrameBytes: maxFrameBytes))
        c.acknowledge = options.read(acknowledge)
        return c
    }

    public static func claims(of configuration: H02SourceConfiguration) -> [String] { configuration.common.claims }

    /// Commands go on the devices' connections (over UDP none: a command to one is refused).
    public static func carriesCommands(_ configuration: H02SourceConfiguration) -> Bool { !configuration.common.udp }

    public static func checkEnvironment(_ configuration: H02SourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        configuration.common.environmentFindings(context: context)
    }

    public static func makeSource(_ configuration: H02SourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        let limits = TrackerLimits(maxFrameBytes: configuration.common.listener.maxFrameBytes)
        let acknowledge = configuration.acknowledge
        return configuration.common.makeSource(protocolName: "H02", context: context) {
            H02Codec(limits: limits, acknowledgePositions: acknowledge)
        }
    }
}
