import Dispatch
import Foundation
import GatewayCore
import GatewayRuntime
import Locking
import OperatorAPI
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
            map(rest, logLevel: logLevel)
        case "state":
            StateCommand.run(rest, registry: registry)
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
        switch read(path, registry: registry) {
        case .success(let config): return config
        case .failure(let error): fail("\(path): \(error)", code: 2)
        }
    }

    /// Reads and validates a pipeline file: what `validate`, `run` and a reload share.
    static func read(_ path: String, registry: PluginRegistry) -> Result<PipelineConfiguration, ConfigurationError> {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read it" : "no such file"
            return .failure(ConfigurationError(problems: [ConfigurationProblem(path: "$", message: reason)]))
        }
        let base = (path as NSString).deletingLastPathComponent
        do {
            return .success(try PipelineConfiguration.load(json: [UInt8](data), registry: registry,
                                                           environment: ProcessInfo.processInfo.environment,
                                                           baseDirectory: base.isEmpty ? "." : base))
        } catch {
            return .failure(error)
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
        defer { if let demoFile { unlink(demoFile) } }
        let level = logLevel ?? config.settings.logLevel ?? .info
        let handler = StderrLogHandler(minimumLevel: demoFile != nil && logLevel == nil ? .warning : level, format: logFormat)
        let pipeline: Pipeline
        let monitor = config.api.map { PipelineMonitor(tail: $0.mapTail) }
        do {
            pipeline = try Pipeline(configuration: config, logHandler: handler, drain: drain, observer: monitor)
        } catch {
            Logger(label: "locgate", handler: handler).error("\(error)")
            if let demoFile { unlink(demoFile) }
            exit(1)
        }
        let api: OperatorAPI? = config.api.flatMap { settings in
            guard let monitor else { return nil }
            let server = OperatorAPI(settings: settings, configuration: config, stats: pipeline.componentStats, monitor: monitor, version: version)
            do {
                try server.start(logger: Logger(label: "api", handler: handler))
            } catch {
                Logger(label: "api", handler: handler).error("cannot start the operator API: \(error)")
                exit(1)
            }
            return server
        }
        let logger = Logger(label: "locgate", handler: handler)
        let notifier = SystemdNotifier.fromEnvironment(logger: logger.child("systemd"))
        let signalSources = SignalHandling.install(pipeline: pipeline, notifier: notifier, logger: logger)
        let (hangups, hangupSource) = SignalHandling.hangups()
        let code = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await pipeline.run(monitor: notifier) }
            group.addTask {
                for await _ in hangups {
                    guard let configPath else {
                        logger.warning("SIGHUP: the demo has no configuration file to reload")
                        continue
                    }
                    await reload(configPath, pipeline: pipeline, api: api, registry: registry, notifier: notifier, logger: logger)
                }
                return nil
            }
            var code: Int32 = 0
            // The pipeline's end ends the SIGHUP loop too.
            if let first = await group.next() { code = first ?? 0 }
            group.cancelAll()
            return code
        }
        api?.stop()
        notifier?.stopping(reason: code == 0 ? "pipeline ended" : "a component failed")
        hangupSource.cancel()
        signalSources.forEach { $0.cancel() }
        if let demoFile { unlink(demoFile) }
        exit(code)
    }

    /// SIGHUP: validates the file exactly as `validate` does; applies it only when it is valid,
    /// else logs every problem (one line each, with its JSON path) and keeps the running pipeline.
    static func reload(_ path: String, pipeline: Pipeline, api: OperatorAPI?, registry: PluginRegistry, notifier: SystemdNotifier?, logger: Logger) async {
        logger.info("SIGHUP: reloading \(path)")
        // systemd shows the unit as reloading until READY=1 follows, whatever the outcome.
        notifier?.reloading()
        defer { notifier?.ready() }
        switch read(path, registry: registry) {
        case .failure(let error):
            for problem in error.problems { logger.error("reload: \(path): \(problem)") }
            logger.error("reload rejected: \(error.problems.count) problem(s) in \(path); the running pipeline is unchanged")
        case .success(let config):
            let outcome = await pipeline.reload(configuration: config)
            if outcome.status == .rejected { logger.warning("\(outcome)") }
            // The API keeps serving where it was bound (api.* changes need a restart) over the
            // components now running.
            if outcome.status != .rejected { api?.update(configuration: config, stats: pipeline.componentStats) }
            if config.api != api?.settings, config.api != nil || api != nil {
                logger.warning("reload: api settings changed; they apply at the next restart")
            }
        }
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
    static func map(_ arguments: [String], logLevel: LogLevel?) {
        // Quiet by default: the page is the output; the readers' info lines are for --log-level info.
        let logger = Logger(label: "map", handler: StderrLogHandler(minimumLevel: logLevel ?? .warning))
        let html: String
        do {
            html = try MapCommand.page(arguments, logger: logger)
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
            ports = try SerialPorts.list()
        } catch {
            fail("cannot list serial ports: \(error)", code: 1)
        }
        if ports.isEmpty {
            print("no serial ports found")
            return
        }
        print(SerialPorts.table(ports), terminator: "")
    }
}

/// SIGINT/SIGTERM: the first asks the pipeline to stop gracefully, a second exits at once.
enum SignalHandling {
    /// Installs the handlers; the returned sources must stay alive while the pipeline runs.
    static func install(pipeline: Pipeline, notifier: SystemdNotifier?, logger: Logger) -> [any DispatchSourceSignal] {
        signal(SIGPIPE, SIG_IGN)
        let count = SignalCounter()
        var sources: [any DispatchSourceSignal] = []
        for (sig, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                if count.increment() > 1 {
                    logger.warning("second signal: exiting now")
                    exit(130)
                }
                logger.info("\(name): stopping (send again to exit at once)")
                notifier?.stopping(reason: name)
                pipeline.shutdown(reason: name)
            }
            source.resume()
            sources.append(source)
        }
        return sources
    }
}

extension SignalHandling {
    /// SIGHUP as a stream: one element per signal (several signals during a reload coalesce
    /// into one more reload). The returned source must stay alive while the stream is read.
    static func hangups() -> (AsyncStream<Void>, any DispatchSourceSignal) {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { continuation.yield() }
        source.resume()
        return (stream, source)
    }
}

final class SignalCounter: Sendable {
    private let value = Locked(0)
    func increment() -> Int { value.withLock { $0 += 1; return $0 } }
}
