import GatewayCore
import TrackerProtocols

/// Configuration of the `gt06` source.
public struct GT06SourceConfiguration: Sendable, Hashable {
    public var common: TrackerSourceConfiguration
    /// The device clock's offset from UTC, in seconds (east positive).
    public var timeZoneOffset = 0
}

/// The `gt06` source: GT06 / Concox / Jimi trackers (`78 78` and `79 79` frames, CRC-ITU
/// checked); logins answered once the device is accepted, positions once they were handled
/// end to end, heartbeats at once.
public enum GT06SourcePlugin: SourcePlugin {
    public static let timezone = Option("timezone", default: "+00:00",
        "The time zone the devices' clocks are set to, as an offset from UTC such as \"+08:00\" (most GT06 devices send UTC).")

    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5023)
    static let maxFrameBytes = 2_048

    public static let info = PluginInfo(
        type: "gt06", kind: .source,
        summary: "GT06 / Concox / Jimi trackers that connect to locgate; logins answered once the IMEI is accepted, positions only once every sink took them over, heartbeats at once.",
        folder: "TrackerInput",
        options: TrackerSourceConfiguration.optionSpecs(defaultListen: defaultListen, maxFrameBytes: maxFrameBytes) + [
            timezone.spec,
        ],
        sample: #"{ "type": "gt06", "listen": "0.0.0.0:5023", "devices": "gt06-devices.json", "timezone": "+00:00" }"#
    )

    public static func configure(_ options: inout OptionReader) -> GT06SourceConfiguration {
        var c = GT06SourceConfiguration(common: .read(&options, defaultListen: defaultListen, maxFrameBytes: maxFrameBytes))
        let zone = options.read(timezone)
        if let offset = parseOffset(zone) {
            c.timeZoneOffset = offset
        } else {
            options.report("timezone", "expected an offset from UTC such as \"+08:00\" or \"-03:30\", got \"\(zone)\"")
        }
        return c
    }

    /// `±HH:MM` (or `UTC`, `Z`) in seconds east of UTC; nil when not one.
    static func parseOffset(_ text: String) -> Int? {
        if text == "UTC" || text == "Z" { return 0 }
        let b = Array(text.utf8)
        guard b.count == 6, b[0] == UInt8(ascii: "+") || b[0] == UInt8(ascii: "-"), b[3] == UInt8(ascii: ":"),
              let h = Int(String(decoding: b[1...2], as: UTF8.self)), let m = Int(String(decoding: b[4...5], as: UTF8.self)),
              h <= 14, m < 60 else { return nil }
        return (b[0] == UInt8(ascii: "-") ? -1 : 1) * (h * 3600 + m * 60)
    }

    public static func claims(of configuration: GT06SourceConfiguration) -> [String] { configuration.common.claims }

    /// Commands go on the devices' connections (over UDP none: a command to one is refused).
    public static func carriesCommands(_ configuration: GT06SourceConfiguration) -> Bool { !configuration.common.udp }

    public static func checkEnvironment(_ configuration: GT06SourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        configuration.common.environmentFindings(context: context)
    }

    public static func makeSource(_ configuration: GT06SourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        let limits = TrackerLimits(maxFrameBytes: configuration.common.listener.maxFrameBytes)
        let offset = configuration.timeZoneOffset
        return configuration.common.makeSource(protocolName: "GT06", context: context) {
            GT06Codec(limits: limits, timeZoneOffsetSeconds: offset)
        }
    }
}
