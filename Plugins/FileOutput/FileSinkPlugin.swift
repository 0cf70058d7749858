import GatewayCore
import SystemIO

/// The `file` sink: positions to a file as JSON Lines, CSV, GeoJSON or GPX.
public enum FileSinkPlugin: SinkPlugin {
    public static let info = PluginInfo(
        type: "file", kind: .sink,
        summary: "Writes positions to a file: JSON Lines, CSV, GeoJSON or GPX, with size rotation.",
        folder: "FileOutput",
        options: [
            OptionSpec("path", "path", required: true, "File to write; relative paths are resolved against the config file's directory."),
            OptionSpec("format", "jsonl | csv | geojson | gpx", default: "from the extension, else \"jsonl\"", "Output format; .csv, .geojson/.json, .gpx select the others."),
            OptionSpec("mode", "append | truncate", default: "\"append\"", "Continue an existing file or start it empty. GeoJSON and GPX documents are continued before their closing tags."),
            OptionSpec("rotate_bytes", "integer", default: "0", "Rotate when the file would exceed this size in bytes (0 = never). The current file is renamed to PATH.1, older ones shift up."),
            OptionSpec("keep_files", "integer", default: "5", "Rotated files kept (PATH.1 … PATH.N); 0 deletes instead of keeping."),
            OptionSpec("fsync", "boolean", default: "false", "fsync after every batch (survives power loss, costs throughput)."),
        ],
        sample: #"{ "type": "file", "inputs": ["receiver"], "path": "track.geojson", "format": "geojson", "mode": "append", "rotate_bytes": 10000000, "keep_files": 3 }"#
    )

    public static func configure(_ options: inout OptionReader) -> FileSinkConfiguration {
        var c = FileSinkConfiguration()
        c.path = options.filePath("path") ?? ""
        if c.path.isEmpty { options.report("path", "required option is missing") }
        let formats = ["jsonl", "csv", "geojson", "gpx"]
        if options.has("format") {
            c.format = PositionFormat(rawValue: options.choice("format", formats, default: "jsonl")) ?? .jsonl
        } else {
            c.format = format(forExtensionOf: c.path)
        }
        c.truncate = options.choice("mode", ["append", "truncate"], default: "append") == "truncate"
        c.rotateBytes = options.int("rotate_bytes", default: 0, in: 0...Int(Int64.max / 2))
        if c.rotateBytes > 0 && c.rotateBytes < 1024 { options.report("rotate_bytes", "must be 0 (never) or at least 1024, got \(c.rotateBytes)") }
        c.keepFiles = options.int("keep_files", default: 5, in: 0...1000)
        c.fsync = options.bool("fsync", default: false)
        return c
    }

    static func format(forExtensionOf path: String) -> PositionFormat {
        let lower = path.lowercased()
        if lower.hasSuffix(".csv") { return .csv }
        if lower.hasSuffix(".geojson") || lower.hasSuffix(".json") { return .geojson }
        if lower.hasSuffix(".gpx") { return .gpx }
        return .jsonl
    }

    public static func claims(of configuration: FileSinkConfiguration) -> [String] { ["file \(configuration.path)"] }

    public static func makeSink(_ configuration: FileSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        FileSink(configuration: configuration, context: context)
    }
}

extension FileSinkPlugin {
    /// The file can be written where `run` will open it: an existing one opens for writing, or
    /// its directory exists and is writable. Nothing is created or truncated.
    public static func checkEnvironment(_ configuration: FileSinkConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        if let problem = FileCheck.writeProblem(configuration.path) { return [context.error("path", problem)] }
        guard let free = FileCheck.freeBytes(FileCheck.directory(of: configuration.path)) else { return [] }
        return [context.info("path", "\(FileCheck.formatBytes(free)) free for \(FileCheck.absolute(configuration.path))")]
    }
}
