import GatewayCore

/// Options of the `line_tail` source.
public struct LineTailConfiguration: Sendable {
    public var path = ""
    public var pollInterval: Duration = .milliseconds(200)
    public var device: String? = nil
    public var fromStart = false
    public var reopenInitial: Duration = .milliseconds(200)
    public var reopenMax: Duration = .seconds(5)
}

/// The `line_tail` source: follows a growing file of NMEA sentences, like `tail -F`.
public enum LineTailPlugin: SourcePlugin {
    public static let info = PluginInfo(
        type: "line_tail", kind: .source,
        summary: "Follows a growing file of NMEA sentences (like tail -F); reopens it when it is replaced, truncated or missing.",
        folder: "LineTail",
        options: [
            OptionSpec("path", "path", required: true, "File to follow; relative paths are resolved against the config file's directory."),
            OptionSpec("poll_interval", "duration", default: "\"200ms\"", "How often to look for new bytes at the end of the file."),
            OptionSpec("device", "string", default: "none", "Device id given to every position."),
            OptionSpec("from_start", "boolean", default: "false", "Read the file from its beginning when first opened (otherwise only what is appended)."),
        ],
        sample: #"{ "type": "line_tail", "path": "/var/log/gnss/receiver.nmea", "device": "boat-1" }"#
    )

    public static func configure(_ options: inout OptionReader) -> LineTailConfiguration {
        var c = LineTailConfiguration()
        if options.requiredString("path") != nil { c.path = options.filePath("path") ?? "" }
        c.pollInterval = options.duration("poll_interval", default: .milliseconds(200), minimum: .milliseconds(10))
        c.device = options.string("device")
        c.fromStart = options.bool("from_start", default: false)
        return c
    }

    public static func makeSource(_ configuration: LineTailConfiguration, context: ComponentContext) throws -> any PositionSource {
        LineTailSource(configuration: configuration, context: context)
    }
}
