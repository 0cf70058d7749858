import Foundation
import GatewayCore
import GatewayProcess
import GatewayRuntime
import SerialPorts
import TrackMap

/// The `locgate` command line, as a library: the `locgate` executable runs it with the built-in
/// plugins, and a package of your own can run it with more (see Docs/Plugins.md, "Your own binary").
public enum LocgateCommand {
    static let version = "0.1.0"

    static let usage = """
    locgate \(version) — a plugin-based location gateway: GNSS sources → transforms → sinks.

    Usage:
      locgate run [CONFIG] [--drain [TIMEOUT]]
                                  Run a pipeline. Without CONFIG, runs a demo: a bundled receiver
                                  log replayed to stdout. SIGHUP re-reads CONFIG and restarts only
                                  the components whose configuration changed. --drain: once the
                                  sources end, wait until every sink's queue is empty (exit 0) or
                                  TIMEOUT ("10m") passes (exit 3); without TIMEOUT, as long as it
                                  takes.
      locgate validate CONFIG [--no-environment]
                                  Check a pipeline file and, unless --no-environment, what it needs
                                  from this machine: files, directories, queues (errors) and peers
                                  (warnings); exit 0, or 2 listing every problem.
      locgate plugins [TYPE]      List every plugin type with its options, defaults and a sample.
      locgate map [OPTIONS] INPUT...
                                  Write a self-contained HTML map of recorded tracks, GeoJSON
                                  fences and geofence events to stdout (`locgate map --help`).
      locgate state list|show|forget CONFIG [DEVICE]
                                  The per-device state the pipeline's transforms keep across
                                  restarts (settings.state): every device, one device's state, or
                                  forget a device (the pipeline must be stopped).
      locgate command send|list|show|cancel CONFIG …
                                  Commands to devices through the running gateway's operator API
                                  (api in CONFIG): send DEVICE TYPE [NAME=VALUE…] (set_interval
                                  interval=20s), list DEVICE, show ID, cancel ID.
      locgate ntrip sourcetable URL [--user USER] [--password PASSWORD] [--ntrip-version 1|2] [--raw]
                                  List an NTRIP caster's mountpoints (ntrip://HOST[:PORT]): format,
                                  systems, position, whether it wants GGA (NMEA), authentication.
      locgate ports               List serial ports: path, transport (native/usb/bluetooth), USB
                                  vid:pid, manufacturer, product, serial number, description.
      locgate version             Print the version.

    Options:
      --log-level LEVEL           trace, debug, info (default), warning, error.
      --log-format FORMAT         text (default; under systemd's journal: no time, <N> priorities)
                                  or json (one object per line: time, level, label, message).
      -h, --help                  Show this help.
      --version                   Print the version.

    Exit status: 0 success, 1 runtime failure, 2 invalid configuration or usage (a bare
    `locgate` prints this help and exits 2), 3 run --drain timed out with positions still queued.
    Docs: Docs/Configuration.md, and `locgate plugins` for every option.
    """

    /// Runs the command line given in `CommandLine.arguments` with the plugins of `registry`,
    /// and exits the process with the command's status.
    public static func main(registry: PluginRegistry) async {
        var args = Array(CommandLine.arguments.dropFirst())
        var logLevel: LogLevel?
        if let v = takeOption("--log-level", from: &args) {
            guard let level = LogLevel(name: v) else {
                fail("--log-level expects one of trace, debug, info, warning, error", code: 2)
            }
            logLevel = level
        }
        if args.first == "map" && (args.contains("-h") || args.contains("--help")) {
            print(MapCommand.usage)
            exit(0)
        }
        var logFormat: StderrLogHandler.Format = .text
        if let v = takeOption("--log-format", from: &args) {
            guard v == "text" || v == "json" else { fail("--log-format expects text or json", code: 2) }
            logFormat = v == "json" ? .json : .text
        }
        // Text under systemd's journal drops the time (the journal has it) and adds priorities.
        if logFormat == .text && StderrLogHandler.stderrIsJournal(environment: ProcessInfo.processInfo.environment) {
            logFormat = .journal
        }
        if args.contains("-h") || args.contains("--help") || args.first == "help" {
            print(usage)
            exit(0)
        }
        if args.contains("--version") { print("locgate \(version)"); exit(0) }
        // Exit 2, not 0: a unit or script that lost its arguments must fail visibly, not look like
        // a clean stop (systemd's Restart=on-failure and `&&` chains both read 0 as success).
        guard let command = args.first else { fail("no command given\n\n\(usage)", code: 2) }
        let rest = Array(args.dropFirst())
        switch command {
        case "run":
            var rest = rest
            let drain = parseDrain(&rest)
            guard rest.count <= 1, !(rest.first ?? "").hasPrefix("-") else { fail("usage: locgate run [CONFIG] [--drain [TIMEOUT]]", code: 2) }
            await run(configPath: rest.first, logLevel: logLevel, logFormat: logFormat, drain: drain, registry: registry)
        case "validate":
            let environment = !rest.contains("--no-environment")
            let files = rest.filter { $0 != "--no-environment" }
            guard files.count == 1, !files[0].hasPrefix("-") else { fail("usage: locgate validate CONFIG [--no-environment]", code: 2) }
            validate(files[0], checkEnvironment: environment, registry: registry)
        case "plugins":
            listPlugins(filter: rest.first, registry: registry)
        case "map":
            await map(rest, logLevel: logLevel, registry: registry)
        case "state":
            StateCommand.run(rest, registry: registry)
        case "command":
            await CommandCommand.run(rest, registry: registry)
        case "ntrip":
            await NTRIPCommand.run(rest)
        case "ports":
            guard rest.isEmpty else { fail("usage: locgate ports", code: 2) }
            listPorts()
        case "version":
            print("locgate \(version)")
        default:
            fail("unknown command \"\(command)\"\n\n\(usage)", code: 2)
        }
    }

    /// Removes `--name VALUE` or `--name=VALUE` from `args`; the value, or a usage failure when
    /// the option has none.
    static func takeOption(_ name: String, from args: inout [String]) -> String? {
        guard let i = args.firstIndex(where: { $0 == name || $0.hasPrefix(name + "=") }) else { return nil }
        if args[i].hasPrefix(name + "=") {
            let v = String(args[i].dropFirst(name.count + 1))
            args.remove(at: i)
            return v
        }
        guard i + 1 < args.count else { fail("\(name) expects a value", code: 2) }
        let v = args[i + 1]
        args.removeSubrange(i...(i + 1))
        return v
    }

    static func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data("locgate: \(Redaction.redact(message))\n".utf8))
        exit(code)
    }

    // MARK: - Configuration

    static func load(_ path: String, registry: PluginRegistry) -> PipelineConfiguration {
        guard FileManager.default.isReadableFile(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read it" : "no such file"
            fail("\(path): \(reason)", code: 2)
        }
        switch GatewayService.readConfiguration(path, registry: registry) {
        case .success(let config): return config
        case .failure(let error): fail("\(path): \(error)", code: 2)
        }
    }

    static func validate(_ path: String, checkEnvironment: Bool, registry: PluginRegistry) {
        let config = load(path, registry: registry)
        let findings = checkEnvironment ? EnvironmentCheck.run(config) : []
        let errors = findings.filter { $0.severity == .error }
        let notes = findings.filter { $0.severity != .error }.map { "  \($0)" }
        guard errors.isEmpty else {
            let n = errors.count
            let lines = errors.map { "  \($0.path): \($0.message)" } + notes
            fail("\(path): the environment is not ready (\(n) problem\(n == 1 ? "" : "s")); `run` would fail:\n" + lines.joined(separator: "\n"), code: 2)
        }
        let checked = checkEnvironment ? "" : " (environment not checked)"
        print("\(path): valid\(checked) — \(config.sources.count) source(s), \(config.transforms.count) transform(s), \(config.sinks.count) sink(s)")
        if !notes.isEmpty { print(notes.joined(separator: "\n")) }
    }

    /// Takes `--drain [TIMEOUT]` (or `--drain=TIMEOUT`) out of `args`.
    static func parseDrain(_ args: inout [String]) -> Pipeline.Drain {
        guard let i = args.firstIndex(where: { $0 == "--drain" || $0.hasPrefix("--drain=") }) else { return .off }
        var text: String?
        if args[i].hasPrefix("--drain=") {
            text = String(args[i].dropFirst("--drain=".count))
            args.remove(at: i)
        } else {
            // The next word is a timeout when it reads as one; otherwise it is the config file.
            if i + 1 < args.count, DurationText.parse(args[i + 1]) != nil { text = args[i + 1]; args.remove(at: i + 1) }
            args.remove(at: i)
        }
        guard let text else { return .untilEmpty(timeout: nil) }
        guard let timeout = DurationText.parse(text), timeout > .zero else {
            fail("--drain expects a timeout such as \"30s\" or \"10m\", got \"\(text)\"", code: 2)
        }
        return .untilEmpty(timeout: timeout)
    }

    // MARK: - Run

    static func run(configPath: String?, logLevel: LogLevel?, logFormat: StderrLogHandler.Format, drain: Pipeline.Drain, registry: PluginRegistry) async {
        var demoFile: String?
        let config: PipelineConfiguration
        if let configPath {
            config = load(configPath, registry: registry)
        } else {
            let path = NSTemporaryDirectory() + "locgate-demo-\(getpid()).nmea"
            guard FileManager.default.createFile(atPath: path, contents: Data(DemoLog.bytes)) else {
                fail("cannot write the demo log to \(path)", code: 1)
            }
            demoFile = path
            let json = """
            {
              "settings": { "stats_interval": false },
              "sources": { "demo": { "type": "file", "path": "\(path)", "rate": "10x", "device": "zeus-9" } },
              "sinks": { "console": { "type": "stdout", "inputs": ["demo"], "format": "text" } }
            }
            """
            do {
                config = try PipelineConfiguration.load(json: Array(json.utf8), registry: registry)
            } catch {
                fail("the demo pipeline is invalid: \(error)", code: 1)
            }
            FileHandle.standardError.write(Data("""
            locgate demo: replaying \(DemoLog.name) (a real receiver log: a boat on the IJsselmeer) at 10x to stdout.
            Write a pipeline file (see Docs/examples/) and run `locgate run CONFIG` for your own.

            """.utf8))
        }
        let level = logLevel ?? config.settings.logLevel ?? .info
        let handler = StderrLogHandler(minimumLevel: demoFile != nil && logLevel == nil ? .warning : level, format: logFormat)
        let service = GatewayService(configuration: config, configurationFile: configPath, registry: registry, logHandler: handler,
                                     drain: drain, version: version)
        let code = await service.run()
        if let demoFile { unlink(demoFile) }
        exit(code)
    }

    // MARK: - Plugins

    static func listPlugins(filter: String?, registry: PluginRegistry) {
        var out = ""
        let plugins = registry.all.filter { filter == nil || $0.info.type == filter }
        if plugins.isEmpty {
            let types = Array(Set(registry.all.map(\.info.type))).sorted()
            let guess = Suggestion.closest(to: filter ?? "", among: types).map { " did you mean \"\($0)\"?" } ?? ""
            fail("no plugin of type \"\(filter ?? "")\";\(guess) types: \(types.joined(separator: ", "))", code: 2)
        }
        for p in plugins {
            let i = p.info
            out += "\(i.kind.rawValue) \(i.type) — \(i.summary)\n"
            for o in i.options {
                let def = o.required ? "required" : "default \(o.defaultValue ?? "none")"
                out += "    \(o.name) (\(o.type); \(def)): \(o.summary)\n"
            }
            out += "  sample: \(i.sample)\n\n"
        }
        print(out, terminator: "")
    }
}

extension LocgateCommand {
    /// `locgate map`: the page goes to stdout; a bad option or an unusable input exits 2 with the
    /// reason, and no page, so a script's `> map.html` never holds a map missing a track it asked for.
    static func map(_ arguments: [String], logLevel: LogLevel?, registry: PluginRegistry) async {
        // Quiet by default: the page is the output; the readers' info lines are for --log-level info.
        let logger = Logger(label: "map", handler: StderrLogHandler(minimumLevel: logLevel ?? .warning))
        let html: String
        do {
            html = try await MapCommand.page(arguments, registry: registry, logger: logger)
        } catch let error as TrackMapError {
            fail("map: \(error)", code: 2)
        } catch {
            fail("map: \(error)", code: 1)
        }
        FileHandle.standardOutput.write(Data(html.utf8))
    }
}

extension LocgateCommand {
    /// `locgate ports`: what the `serial` source's `port` and `match` options can name.
    static func listPorts() {
        let ports: [SerialPortInfo]
        do {
            ports = try SerialPortList.list()
        } catch {
            fail("cannot list serial ports: \(error)", code: 1)
        }
        if ports.isEmpty {
            print("no serial ports found")
            return
        }
        print(SerialPortList.table(ports), terminator: "")
    }
}
