import GatewayCore

/// Configuration of the `exec` source.
public struct ExecSourceConfiguration: Sendable {
    public enum Format: String, Sendable, CaseIterable { case nmea, jsonl }
    /// Program and arguments (no shell: write `["sh", "-c", "…"]` for one).
    public var command: [String] = []
    /// Added to (or replacing entries of) the gateway's own environment.
    public var environment: [String: String] = [:]
    public var cwd: String?
    public var format: Format = .nmea
    /// Overrides the device id of every position when set.
    public var device: String?
    public var requireChecksum = true
    public var stallTimeout: Duration?
    public var restartInitial: Duration = .seconds(1)
    public var restartMax: Duration = .seconds(60)
    public var killTimeout: Duration = .seconds(5)
    public var maxLineBytes = 65_536
}

/// The `exec` source: runs a program and reads positions from its standard output.
public enum ExecSourcePlugin: SourcePlugin {
    public static let info = PluginInfo(
        type: "exec", kind: .source,
        summary: "Runs a program (any language) and reads NMEA or locgate JSON Lines positions from its stdout; restarts it with backoff.",
        folder: "ExecSource",
        options: [
            OptionSpec("command", "array", required: true, "Program and arguments, e.g. [\"python3\", \"walk.py\"]; no shell (use [\"sh\", \"-c\", \"…\"] for one). A bare name is searched in PATH; a relative path is resolved against cwd."),
            OptionSpec("env", "object", default: "{}", "Environment variables added to the gateway's own, e.g. {\"API_TOKEN\": \"${TOKEN}\"}."),
            OptionSpec("cwd", "path", default: "the gateway's working directory", "Working directory of the program; relative paths are resolved against the config file's directory."),
            OptionSpec("format", "nmea | jsonl", default: "\"nmea\"", "What the program prints: NMEA 0183 sentences, or one JSON position per line in locgate's schema (gpsd TPV names)."),
            OptionSpec("device", "string", default: "none (jsonl: the line's \"device\")", "Device id given to every position."),
            OptionSpec("require_checksum", "boolean", default: "true", "nmea only: reject sentences without a *HH checksum."),
            OptionSpec("stall_timeout", "duration", default: "none", "Restart the program when it printed nothing on stdout for this long (at least 100ms)."),
            OptionSpec("restart_initial", "duration", default: "\"1s\"", "First wait before restarting a program that exited; doubles after each quick exit (with jitter)."),
            OptionSpec("restart_max", "duration", default: "\"60s\"", "Longest wait between restarts."),
            OptionSpec("kill_timeout", "duration", default: "\"5s\"", "On shutdown or restart: SIGTERM, then SIGKILL if the program is still running after this long."),
            OptionSpec("max_line_bytes", "integer", default: "65536", "jsonl only: longer lines are counted (exec.long_lines) and skipped."),
        ],
        sample: #"{ "type": "exec", "command": ["python3", "exec-random-walk.py", "--interval", "1"], "format": "jsonl", "env": { "WALK_SEED": "7" }, "kill_timeout": "3s" }"#
    )

    public static func configure(_ options: inout OptionReader) -> ExecSourceConfiguration {
        var c = ExecSourceConfiguration()
        let present = options.has("command")
        c.command = options.stringArray("command") ?? []
        if !present { options.report("command", "required option is missing") }
        else if c.command.isEmpty { options.report("command", "must name a program") }
        else if c.command[0].isEmpty { options.report("command", "the program name must not be empty") }
        c.environment = options.stringMap("env") ?? [:]
        c.cwd = options.filePath("cwd")
        c.format = ExecSourceConfiguration.Format(rawValue: options.choice("format", ["nmea", "jsonl"], default: "nmea")) ?? .nmea
        c.device = options.string("device")
        c.requireChecksum = options.bool("require_checksum", default: true)
        if options.has("stall_timeout") {
            c.stallTimeout = options.duration("stall_timeout", default: .seconds(30), minimum: .milliseconds(100))
        }
        c.restartInitial = options.duration("restart_initial", default: .seconds(1), minimum: .milliseconds(10))
        c.restartMax = options.duration("restart_max", default: .seconds(60), minimum: .milliseconds(10))
        if c.restartMax < c.restartInitial {
            options.report("restart_max", "must be at least restart_initial (\(DurationText.format(c.restartInitial)))")
        }
        c.killTimeout = options.duration("kill_timeout", default: .seconds(5))
        c.maxLineBytes = options.int("max_line_bytes", default: 65_536, in: 256...(64 << 20))
        return c
    }

    public static func makeSource(_ configuration: ExecSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        ExecPositionSource(configuration: configuration, context: context)
    }
}
