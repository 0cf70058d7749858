import GatewayCore
import PositionEncoding
import SystemIO
import EnvironmentChecks

/// The `file` sink: positions to a file as JSON Lines, CSV, GeoJSON or GPX.
public enum FileSinkPlugin: SinkPlugin {
    public static let mode = Option("mode", choices: ["append", "truncate"], default: "append",
        "Continue an existing file or start it empty. GeoJSON and GPX documents are continued before their closing tags.")
    public static let rotateBytes = Option("rotate_bytes", default: 0, in: 0...Int(Int64.max / 2),
        "Rotate when the file would exceed this size in bytes (0 = never). The current file is renamed to PATH.1, older ones shift up.")
    public static let keepFiles = Option("keep_files", default: 5, in: 0...1000,
        "Rotated files kept (PATH.1 … PATH.N); 0 deletes instead of keeping.")
    public static let fsync = Option("fsync", default: false,
        "fsync after every batch (survives power loss, costs throughput).")

    public static let info = PluginInfo(
        type: "file", kind: .sink,
        summary: "Writes positions to a file: JSON Lines, CSV, GeoJSON or GPX, with size rotation.",
        folder: "FileOutput",
        options: [
            OptionSpec("path", "path", required: true, "File to write; relative paths are resolved against the config file's directory."),
            OptionSpec("format", "jsonl | csv | geojson | gpx", default: "from the extension, else \"jsonl\"", "Output format; .csv, .geojson/.json, .gpx select the others."),
            mode.spec,
            rotateBytes.spec,
            keepFiles.spec,
            fsync.spec,
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
        c.truncate = options.read(mode) == "truncate"
        c.rotateBytes = options.read(rotateBytes)
        if c.rotateBytes > 0 && c.rotateBytes < 1024 { options.report("rotate_bytes", "must be 0 (never) or at least 1024, got \(c.rotateBytes)") }
        c.keepFiles = options.read(keepFiles)
        c.fsync = options.read(fsync)
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
