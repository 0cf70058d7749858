import GatewayCore
import SystemIO

/// The `file` source: replays NMEA logs, JSON Lines and GPX tracks.
public enum FileReplayPlugin: SourcePlugin {
    public static let rate = Option("rate", default: FileReplayConfiguration.Rate.max, typeName: "\"max\" | \"realtime\" | \"<N>x\"",
        "max: as fast as possible; realtime: paced by the positions' times; e.g. \"10x\": ten times faster than real time (N from 0.001 to 1000000).",
        jsonText: { rate in
            switch rate {
            case .max: OptionText.string("max")
            case .paced(let factor): OptionText.string(factor == 1 ? "realtime" : "\(JSONValue.number(factor).jsonText)x")
            }
        },
        read: { key, reader in
            guard let text = reader.string(key) else { return nil }
            if let rate = parseRate(text) { return rate }
            reader.report(key, "expected \"max\", \"realtime\" or a multiplier such as \"10x\", got \"\(text)\"")
            return nil
        })
    public static let loop = Option("loop", default: false,
        "Start again at the end of the file (ids get a pass number so they stay unique).")
    public static let requireChecksum = Option("require_checksum", default: true,
        "NMEA only: reject sentences without a *HH checksum.")
    public static let progress = Option("progress", default: true,
        "Show progress: on a terminal, a line redrawn on stderr (rate max, files over 1 MiB); otherwise an info log line every 10 s with bytes read, % and positions/s.")

    public static let info = PluginInfo(
        type: "file", kind: .source,
        summary: "Replays a receiver log (NMEA, gpsd-style with # lines), locgate JSON Lines, or a GPX 1.0/1.1 track.",
        folder: "FileInput",
        options: [
            OptionSpec("path", "path", required: true, "File to replay; relative paths are resolved against the config file's directory."),
            OptionSpec("format", "nmea | jsonl | gpx", default: "from the extension", "Input format: .jsonl/.json → jsonl, .gpx → gpx, anything else → nmea."),
            rate.spec,
            loop.spec,
            OptionSpec("device", "string", default: "none", "Device id given to every position."),
            requireChecksum.spec,
            progress.spec,
        ],
        sample: #"{ "type": "file", "path": "drive.nmea", "rate": "10x", "loop": false, "device": "test-receiver" }"#
    )

    public static func configure(_ options: inout OptionReader) -> FileReplayConfiguration {
        var c = FileReplayConfiguration()
        c.path = options.filePath("path") ?? ""
        if c.path.isEmpty { options.report("path", "required option is missing") }
        if options.has("format") {
            c.format = FileReplayConfiguration.Format(rawValue: options.choice("format", ["nmea", "jsonl", "gpx"], default: "nmea")) ?? .nmea
        } else {
            c.format = FileReplayConfiguration.Format(forPath: c.path)
        }
        c.rate = options.read(rate)
        c.loop = options.read(loop)
        c.device = options.string("device")
        c.requireChecksum = options.read(requireChecksum)
        c.progress = options.read(progress)
        return c
    }

    static func parseRate(_ text: String) -> FileReplayConfiguration.Rate? {
        switch text.lowercased() {
        case "max": return .max
        case "realtime", "1x": return .paced(1)
        default:
            // 1/1000 to a million times real time: beyond that, pacing is meaningless (use "max").
            guard text.lowercased().hasSuffix("x"), let f = Double(text.dropLast()), f >= 0.001, f <= 1_000_000 else { return nil }
            return .paced(f)
        }
    }

    public static func makeSource(_ configuration: FileReplayConfiguration, context: ComponentContext) throws -> any PositionSource {
        FileReplaySource(configuration: configuration, context: context)
    }
}

extension FileReplayPlugin {
    /// The file opens for reading as the replay will open it.
    public static func checkEnvironment(_ configuration: FileReplayConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        do {
            var file = try ChunkedFile(path: configuration.path)
            file.close()
            return []
        } catch {
            return [context.error("path", "\(error)")]
        }
    }
}
