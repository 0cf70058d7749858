import GatewayCore
import TrackerProtocols

/// Configuration of the `jt808` source.
public struct JT808SourceConfiguration: Sendable, Hashable {
    public var common: TrackerSourceConfiguration
    var auth = JT808SourcePlugin.auth.defaultValue
    /// The device clock's offset from UTC, in seconds (east positive).
    public var timeZoneOffset = 8 * 3600
    public var datum = Datum.wgs84
    public var splitTimeout = JT808SourcePlugin.splitTimeout.defaultValue
    public var maxSplitBytes = JT808SourcePlugin.maxSplitBytes.defaultValue
}

/// The `jt808` source: JT/T 808 terminals (2011, 2013 and 2019; TCP, or UDP with `udp`),
/// registered and authenticated with codes kept in the state store, positions answered 0x8001
/// only once every sink took them over.
public enum JT808SourcePlugin: SourcePlugin {
    public static let udp = Option("udp", default: false,
        "Listen for UDP datagrams instead of TCP connections; split messages are then put together but missing packets are not asked for.")
    static let auth = Option("auth", default: JT808Terminals.Mode.issued,
        "issued: a random authentication code per terminal, kept in the state store, and only it is accepted (positions before authentication close the connection); phone: the terminal's phone digits are its code (as Traccar issues them: terminals registered there authenticate unchanged); any: every code is accepted and terminals that never authenticate are taken too.")
    public static let timezone = Option("timezone", default: "+08:00",
        "The time zone of the terminals' clocks, as an offset from UTC (the protocol's is GMT+8, Beijing time).")
    public static let datum = Option("datum", default: "wgs84",
        "The datum of the terminals' coordinates: wgs84, or gcj02 (bd09) for terminals that send what Chinese maps show; positions say it in their datum, and the coordinates transform converts.")
    public static let splitTimeout = Option("split_timeout", default: Duration.seconds(60), minimum: .seconds(1),
        "A split message (attribute bit 13) not complete this long after its first packet is dropped, never answered (the terminal still holds it): split.incomplete when its missing packets were asked for (0x8003, up to three times spread over this time), split.expired when they were not (UDP).")
    public static let maxSplitBytes = Option("max_split_bytes", default: 262_144, in: 1_024...67_108_864,
        "Bytes of split-message packets kept per connection (over UDP: for all terminals); a terminal that shares them (over UDP, or on a connection that has not authenticated as it) holds at most a quarter. A message that would need more is dropped and its packet answered \"not supported\" (split.too_large).")

    /// Traccar's port for JT/T 808 (its `jt808`, formerly `huabao`, protocol).
    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5015)
    /// A body is at most 1,023 bytes; escaped, a frame twice its size and the header.
    static let maxFrameBytes = 4_096

    public static let info = PluginInfo(
        type: "jt808", kind: .source,
        summary: "JT/T 808 vehicle terminals (2011/2013/2019; TCP or UDP): registration and authentication with codes kept across restarts, split messages put together, positions answered only once every sink took them over.",
        folder: "TrackerInput",
        options: TrackerSourceConfiguration.optionSpecs(defaultListen: defaultListen, maxFrameBytes: maxFrameBytes, identifier: "terminal number") + [
            udp.spec, auth.spec, timezone.spec, datum.spec, splitTimeout.spec, maxSplitBytes.spec,
        ],
        sample: #"{ "type": "jt808", "listen": "0.0.0.0:5015", "devices": { "13912345678": "bus-12" }, "timezone": "+08:00" }"#
    )

    public static func configure(_ options: inout OptionReader) -> JT808SourceConfiguration {
        let useUDP = options.read(udp)
        var c = JT808SourceConfiguration(common: .read(&options, defaultListen: defaultListen, maxFrameBytes: maxFrameBytes, udp: useUDP))
        c.auth = options.read(auth)
        let zone = options.read(timezone)
        if let offset = GT06SourcePlugin.parseOffset(zone) {
            c.timeZoneOffset = offset
        } else {
            options.report("timezone", "expected an offset from UTC such as \"+08:00\" or \"-03:30\", got \"\(zone)\"")
        }
        let datumText = options.read(datum)
        if let parsed = Datum(parsing: datumText), parsed.isGeographic {
            c.datum = parsed
        } else {
            options.report("datum", "expected wgs84, gcj02 or bd09, got \"\(datumText)\"")
        }
        c.splitTimeout = options.read(splitTimeout)
        c.maxSplitBytes = options.read(maxSplitBytes)
        return c
    }

    public static func claims(of configuration: JT808SourceConfiguration) -> [String] { configuration.common.claims }

    public static func checkEnvironment(_ configuration: JT808SourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        configuration.common.environmentFindings(context: context)
    }

    public static func keepsState(_ configuration: JT808SourceConfiguration) -> Bool { configuration.auth != .phone }

    /// Over UDP it carries none (a command needs a connection), but its devices are known, so a
    /// command to one is refused with a reason rather than as an unknown device.
    public static func carriesCommands(_ configuration: JT808SourceConfiguration) -> Bool { !configuration.common.udp }

    public static func makeSource(_ configuration: JT808SourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        let udp = configuration.common.udp
        let options = JT808Codec.Options(
            limits: TrackerLimits(maxFrameBytes: configuration.common.listener.maxFrameBytes),
            timeZoneOffsetSeconds: configuration.timeZoneOffset, datum: configuration.datum,
            maxSplitBytes: configuration.maxSplitBytes, splitTimeoutMilliseconds: configuration.splitTimeout.milliseconds,
            splitRequests: udp ? 0 : 3)
        let terminals = JT808Terminals(mode: configuration.auth, store: context.stateStore, key: "sources.\(context.id)", context: context)
        return configuration.common.makeSource(protocolName: "JT/T 808", context: context, admissions: terminals) {
            JT808Codec(options: options)
        }
    }
}
