import GatewayCore

/// Configuration of the `exec` source.
public struct ExecSourceConfiguration: Sendable {
    public enum Format: String, Sendable, CaseIterable { case nmea, jsonl }
    /// Program and arguments (no shell: write `["sh", "-c", "…"]` for one).
    public var command: [String] = []
    /// Added to (or replacing entries of) the gateway's own environment.
    public var environment = ExecSourcePlugin.env.defaultValue
    public var cwd: String?
    public var format = ExecSourcePlugin.format.defaultValue
    /// Overrides the device id of every position when set.
    public var device: String?
    public var requireChecksum = ExecSourcePlugin.requireChecksum.defaultValue
    public var stallTimeout: Duration?
    public var restartInitial = ExecSourcePlugin.restartInitial.defaultValue
    public var restartMax = ExecSourcePlugin.restartMax.defaultValue
    public var killTimeout = ExecSourcePlugin.killTimeout.defaultValue
    public var maxLineBytes = ExecSourcePlugin.maxLineBytes.defaultValue
}

/// The `exec` source: runs a program and reads positions from its standard output.
public enum ExecSourcePlugin: SourcePlugin {
    public static let env = Option("env", default: [String: String](),
        "Environment variables added to the gateway's own, e.g. {\"API_TOKEN\": \"${TOKEN}\"}.")
    public static let format = Option("format", default: ExecSourceConfiguration.Format.nmea,
        "What the program prints: NMEA 0183 sentences, or one JSON position per line in locgate's schema (gpsd TPV names).")
    public static let requireChecksum = Option("require_checksum", default: true,
        "nmea only: reject sentences without a *HH checksum.")
    public static let restartInitial = Option("restart_initial", default: Duration.seconds(1), minimum: .milliseconds(10),
        "First wait before restarting a program that exited; doubles after each quick exit (with jitter).")
    public static let restartMax = Option("restart_max", default: Duration.seconds(60), minimum: .milliseconds(10),
        "Longest wait between restarts.")
    public static let killTimeout = Option("kill_timeout", default: Duration.seconds(5),
        "On shutdown or restart: SIGTERM, then SIGKILL if the program is still running after this long.")
    public static let maxLineBytes = Option("max_line_bytes", default: 65_536, in: 256...(64 << 20),
        "jsonl only: longer lines are counted (exec.long_lines) and skipped.")

    public static let info = PluginInfo(
        type: "exec", kind: .source,
        summary: "Runs a program (any language) and reads NMEA or locgate JSON Lines positions from its stdout; restarts it with backoff.",
        folder: "ExecInput",
        options: [
            OptionSpec("command", "array", required: true, "Program and arguments, e.g. [\"python3\", \"walk.py\"]; no shell (use [\"sh\", \"-c\", \"…\"] for one). A bare name is searched in PATH; a relative path is resolved against cwd."),
            env.spec,
            OptionSpec("cwd", "path", default: "the gateway's working directory", "Working directory of the program; relative paths are resolved against the config file's directory."),
            format.spec,
            OptionSpec("device", "string", default: "none (jsonl: the line's \"device\")", "Device id given to every position."),
            requireChecksum.spec,
            OptionSpec("stall_timeout", "duration", default: "none", "Restart the program when it printed nothing on stdout for this long (at least 100ms)."),
            restartInitial.spec,
            restartMax.spec,
            killTimeout.spec,
            maxLineBytes.spec,
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
        c.environment = options.read(env)
        c.cwd = options.filePath("cwd")
        c.format = options.read(format)
        c.device = options.string("device")
        c.requireChecksum = options.read(requireChecksum)
        if options.has("stall_timeout") {
            c.stallTimeout = options.duration("stall_timeout", default: .seconds(30), minimum: .milliseconds(100))
        }
        c.restartInitial = options.read(restartInitial)
        c.restartMax = options.read(restartMax)
        if c.restartMax < c.restartInitial {
            options.report("restart_max", "must be at least restart_initial (\(DurationText.format(c.restartInitial)))")
        }
        c.killTimeout = options.read(killTimeout)
        c.maxLineBytes = options.read(maxLineBytes)
        return c
    }

    public static func makeSource(_ configuration: ExecSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        ExecPositionSource(configuration: configuration, context: context)
    }
}
