import GatewayCore
import TrackerProtocols

/// Configuration of the text-protocol tracker sources (`gps103`, `watch`, `gl200`, `meitrack`, `suntech`).
public struct TextTrackerSourceConfiguration: Sendable, Hashable {
    public var common: TrackerSourceConfiguration
    /// `gl200`'s `sack`: every message answered `+SACK:<count>$`.
    public var sack = false
    /// `gl200`'s `password`: the first parameter of every command.
    public var password = ""
}

/// A tracker source whose options are the shared ones and perhaps `udp` (and, for `gl200`, `sack`).
protocol TextTrackerSourcePlugin: SourcePlugin where Configuration == TextTrackerSourceConfiguration {
    static var defaultListen: ListenAddress { get }
    static var maxFrameBytes: Int { get }
    /// Whether the protocol is also spoken over UDP (one message a datagram).
    static var speaksUDP: Bool { get }
    static var protocolName: String { get }
    /// What names a device to the protocol (`IMEI`, `device id`), for the option summaries.
    static var identifier: String { get }
    /// The codec for one connection (or, over UDP, for every datagram).
    static func codec(limits: TrackerLimits, configuration: TextTrackerSourceConfiguration) -> any TrackerCodec
}

extension TextTrackerSourcePlugin {
    static var identifier: String { "IMEI" }

    static var udpOption: Option<Bool> {
        Option("udp", default: false, "Listen for UDP datagrams (one message each, answered to its sender) instead of TCP connections; the connection limits then do not apply.")
    }

    /// The shared options, then `udp` where the protocol has it, then `extra`.
    static func optionSpecs(_ extra: [OptionSpec] = []) -> [OptionSpec] {
        TrackerSourceConfiguration.optionSpecs(defaultListen: defaultListen, maxFrameBytes: maxFrameBytes, identifier: identifier)
            + (speaksUDP ? [udpOption.spec] : []) + extra
    }

    static func readCommon(_ options: inout OptionReader) -> TextTrackerSourceConfiguration {
        let udp = speaksUDP ? options.read(udpOption) : false
        return TextTrackerSourceConfiguration(common: .read(&options, defaultListen: defaultListen, maxFrameBytes: maxFrameBytes, udp: udp))
    }

    public static func configure(_ options: inout OptionReader) -> TextTrackerSourceConfiguration { readCommon(&options) }

    public static func claims(of configuration: TextTrackerSourceConfiguration) -> [String] { configuration.common.claims }

    public static func checkEnvironment(_ configuration: TextTrackerSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        configuration.common.environmentFindings(context: context)
    }

    /// Commands go on a device's TCP connection; over UDP its devices are known, so a command to
    /// one is refused with a reason rather than as an unknown device.
    public static func carriesCommands(_ configuration: TextTrackerSourceConfiguration) -> Bool { !configuration.common.udp }

    public static func makeSource(_ configuration: TextTrackerSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        let limits = TrackerLimits(maxFrameBytes: configuration.common.listener.maxFrameBytes)
        return configuration.common.makeSource(protocolName: protocolName, context: context) {
            codec(limits: limits, configuration: configuration)
        }
    }
}

/// The `gps103` source: Coban TK102/TK103 and the trackers that copy their text protocol.
public enum GPS103SourcePlugin: TextTrackerSourcePlugin {
    /// Traccar's port for the protocol.
    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5001)
    static let maxFrameBytes = 1_024
    static let speaksUDP = true
    static let protocolName = "GPS103"

    public static let info = PluginInfo(
        type: "gps103", kind: .source,
        summary: "GPS103 / Coban TK102-TK103 trackers (imei:… text, TCP or UDP): logins answered LOAD, heartbeats ON, SOS alarms once their position was committed; positions have no answer in this protocol.",
        folder: "TrackerInput", options: optionSpecs(),
        sample: #"{ "type": "gps103", "listen": "0.0.0.0:5001", "devices": { "359586015829802": "van-4" } }"#)

    static func codec(limits: TrackerLimits, configuration: TextTrackerSourceConfiguration) -> any TrackerCodec {
        GPS103Codec(limits: limits, datagrams: configuration.common.udp)
    }
}

/// The `watch` source: children's and elderly people's watches (`[3G*…]`).
public enum WatchSourcePlugin: TextTrackerSourcePlugin {
    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5093)
    /// Voice messages and photos travel in frames of several kilobytes.
    static let maxFrameBytes = 32_768
    static let speaksUDP = false
    static let protocolName = "watch"
    static let identifier = "device id"

    public static let info = PluginInfo(
        type: "watch", kind: .source,
        summary: "Children's and elderly people's watches ([3G*id*len*…] frames, also SG/ZJ/CS makers): links answered at once, alarms once their position was committed; UD positions have no answer in this protocol.",
        folder: "TrackerInput", options: optionSpecs(),
        sample: #"{ "type": "watch", "listen": "0.0.0.0:5093", "devices": { "9031853319": "lena" } }"#)

    static func codec(limits: TrackerLimits, configuration: TextTrackerSourceConfiguration) -> any TrackerCodec {
        WatchCodec(limits: limits)
    }
}

/// The `gl200` source: Queclink @Track devices (text protocol).
public enum GL200SourcePlugin: TextTrackerSourcePlugin {
    static let sack = Option("sack", default: false,
        "The devices acknowledge every message (server acknowledgement enabled with AT+GTSRI / AT+GTQSS): answer each +SACK:<count>$, reports once every sink took their positions over, so a device resends what was not committed.")
    static let password = Option("password", default: "",
        "The devices' password, the first parameter of every command (AT+GTRTO=<password>,…): Queclink devices ship with their model's name in lower case (gl300, gv300); most refuse a command with the empty default.")

    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5004)
    static let maxFrameBytes = 2_048
    static let speaksUDP = true
    static let protocolName = "@Track"

    public static let info = PluginInfo(
        type: "gl200", kind: .source,
        summary: "Queclink @Track trackers (GL200/GL300/GV300/GV500…, +RESP/+BUFF/+ACK text, TCP or UDP): heartbeats answered at once; with sack, every report answered only once every sink took it over; +BUFF positions marked late.",
        folder: "TrackerInput", options: optionSpecs([sack.spec, password.spec]),
        sample: #"{ "type": "gl200", "listen": "0.0.0.0:5004", "devices": { "865284042140479": "truck-9" }, "sack": true }"#)

    public static func configure(_ options: inout OptionReader) -> TextTrackerSourceConfiguration {
        var c = readCommon(&options)
        c.sack = options.read(sack)
        // A secret: never in a log line (a command's bytes are logged by no one).
        c.password = options.secretString(password.name) ?? password.defaultValue
        if c.password.contains(",") || c.password.contains("$") { options.report("password", "a password cannot hold \",\" or \"$\"") }
        return c
    }

    static func codec(limits: TrackerLimits, configuration: TextTrackerSourceConfiguration) -> any TrackerCodec {
        GL200Codec(limits: limits, sack: configuration.sack, datagrams: configuration.common.udp, password: configuration.password)
    }
}

/// The `meitrack` source: Meitrack trackers (`$$…*XX` frames, checksum verified).
public enum MeitrackSourcePlugin: TextTrackerSourcePlugin {
    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5020)
    static let maxFrameBytes = 4_096
    static let speaksUDP = false
    static let protocolName = "Meitrack"

    public static let info = PluginInfo(
        type: "meitrack", kind: .source,
        summary: "Meitrack trackers ($$…*XX frames, length and checksum verified): CCC cache batches answered only once every sink took them over (the device then deletes them); AAA reports have no answer in this protocol.",
        folder: "TrackerInput", options: optionSpecs(),
        sample: #"{ "type": "meitrack", "listen": "0.0.0.0:5020", "devices": { "866771027160687": "bus-3" } }"#)

    static func codec(limits: TrackerLimits, configuration: TextTrackerSourceConfiguration) -> any TrackerCodec {
        MeitrackCodec(limits: limits)
    }
}

/// The `suntech` source: Suntech trackers (SA200, ST300, ST600, ST910, ST4xx, universal).
public enum SuntechSourcePlugin: TextTrackerSourcePlugin {
    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5011)
    static let maxFrameBytes = 2_048
    static let speaksUDP = true
    static let protocolName = "Suntech"
    static let identifier = "device id"

    public static let info = PluginInfo(
        type: "suntech", kind: .source,
        summary: "Suntech trackers (SA200/ST300/ST600/ST910/ST4xx and universal text and binary reports, TCP or UDP); the protocol answers nothing.",
        folder: "TrackerInput", options: optionSpecs(),
        sample: #"{ "type": "suntech", "listen": "0.0.0.0:5011", "devices": { "907131077": "forklift-1" } }"#)

    static func codec(limits: TrackerLimits, configuration: TextTrackerSourceConfiguration) -> any TrackerCodec {
        SuntechCodec(limits: limits, datagrams: configuration.common.udp)
    }
}
