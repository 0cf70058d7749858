import Dispatch
import Foundation
import GatewayCore
import GatewayRuntime
import SerialSource
import TrackMap
import Synchronization

/// The `locgate` command line, as a library: the `locgate` executable runs it with the built-in
/// plugins, and a package of your own can run it with more (see Docs/Plugins.md, "Your own binary").
public enum LocgateCommand {
    static let version = "0.1.0"

    static let usage = """
    locgate \(version) — a plugin-based location gateway: GNSS sources → transforms → sinks.

    Usage:
      locgate run [CONFIG]        Run a pipeline. Without CONFIG, runs a demo: a bundled receiver
                                  log replayed to stdout. SIGHUP re-reads CONFIG and restarts only
                                  the components whose configuration changed.
      locgate validate CONFIG     Check a pipeline file; exit 0, or 2 listing every problem.
      locgate plugins [TYPE]      List every plugin type with its options, defaults and a sample.
      locgate map [OPTIONS] INPUT...
                                  Write a self-contained HTML map of recorded tracks, GeoJSON
                                  fences and geofence events to stdout (`locgate map --help`).
      locgate ports               List serial ports: path, transport (native/usb/bluetooth), USB
                                  vid:pid, manufacturer, product, serial number, description.
      locgate version             Print the version.

    Options:
      --log-level LEVEL           trace, debug, info (default), warning, error.
      -h, --help                  Show this help.
      --version                   Print the version.

    Exit status: 0 success, 1 runtime failure, 2 invalid configuration or usage.
    Docs: Docs/Configuration.md, and `locgate plugins` for every option.
    """

    /// Runs the command line given in `CommandLine.arguments` with the plugins of `registry`,
    /// and exits the process with the command's status.
    public static func main(registry: PluginRegistry) async {
        var args = Array(CommandLine.arguments.dropFirst())
        var logLevel: LogLevel?
        if let i = args.firstIndex(where: { $0 == "--log-level" || $0.hasPrefix("--log-level=") }) {
            let value: String?
            if args[i].hasPrefix("--log-level=") {
                value = String(args[i].dropFirst("--log-level=".count))
                args.remove(at: i)
            } else {
                value = i + 1 < args.count ? args[i + 1] : nil
                args.removeSubrange(i..<min(args.count, i + 2))
            }
            guard let v = value, let level = LogLevel(name: v) else {
                fail("--log-level expects one of trace, debug, info, warning, error", code: 2)
            }
            logLevel = level
        }
        if args.first == "map" && (args.contains("-h") || args.contains("--help")) {
            print(MapCommand.usage)
            exit(0)
        }
        if args.contains("-h") || args.contains("--help") || args.first == "help" {
            print(usage)
            exit(0)
        }
        if args.contains("--version") { print("locgate \(version)"); exit(0) }
        let command = args.first ?? "run"
        let rest = Array(args.dropFirst())
        switch command {
        case "run":
            guard rest.count <= 1 else { fail("usage: locgate run [CONFIG]", code: 2) }
            await run(configPath: rest.first, logLevel: logLevel, registry: registry)
        case "validate":
            guard rest.count == 1 else { fail("usage: locgate validate CONFIG", code: 2) }
            validate(rest[0], registry: registry)
        case "plugins":
            listPlugins(filter: rest.first, registry: registry)
        case "map":
            map(rest, logLevel: logLevel)
        case "ports":
            guard rest.isEmpty else { fail("usage: locgate ports", code: 2) }
            listPorts()
        case "version":
            print("locgate \(version)")
        default:
            fail("unknown command \"\(command)\"\n\n\(usage)", code: 2)
        }
    }

    static func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data("locgate: \(message)\n".utf8))
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

    static func validate(_ path: String, registry: PluginRegistry) {
        let config = load(path, registry: registry)
        print("\(path): valid — \(config.sources.count) source(s), \(config.transforms.count) transform(s), \(config.sinks.count) sink(s)")
    }

    // MARK: - Run

    static func run(configPath: String?, logLevel: LogLevel?, registry: PluginRegistry) async {
        var demoFile: String?
        let config: PipelineConfiguration
        if let configPath {
            config = load(configPath, registry: registry)
        } else {
            let path = NSTemporaryDirectory() + "locgate-demo-\(getpid()).nmea"
            guard FileManager.default.createFile(atPath: path, contents: Data(DemoLog.text.utf8)) else {
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
        let handler = StderrLogHandler(minimumLevel: demoFile != nil && logLevel == nil ? .warning : level)
        let pipeline: Pipeline
        do {
            pipeline = try Pipeline(configuration: config, logHandler: handler)
        } catch {
            Logger(label: "locgate", handler: handler).error("\(error)")
            if let demoFile { unlink(demoFile) }
            exit(1)
        }
        let logger = Logger(label: "locgate", handler: handler)
        let signalSources = SignalHandling.install(pipeline: pipeline, logger: logger)
        let (hangups, hangupSource) = SignalHandling.hangups()
        let code = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await pipeline.run() }
            group.addTask {
                for await _ in hangups {
                    guard let configPath else {
                        logger.warning("SIGHUP: the demo has no configuration file to reload")
                        continue
                    }
                    await reload(configPath, pipeline: pipeline, registry: registry, logger: logger)
                }
                return nil
            }
            var code: Int32 = 0
            // The pipeline's end ends the SIGHUP loop too.
            if let first = await group.next() { code = first ?? 0 }
            group.cancelAll()
            return code
        }
        hangupSource.cancel()
        signalSources.forEach { $0.cancel() }
        if let demoFile { unlink(demoFile) }
        exit(code)
    }

    /// SIGHUP: validates the file exactly as `validate` does; applies it only when it is valid,
    /// else logs every problem (one line each, with its JSON path) and keeps the running pipeline.
    static func reload(_ path: String, pipeline: Pipeline, registry: PluginRegistry, logger: Logger) async {
        logger.info("SIGHUP: reloading \(path)")
        switch read(path, registry: registry) {
        case .failure(let error):
            for problem in error.problems { logger.error("reload: \(path): \(problem)") }
            logger.error("reload rejected: \(error.problems.count) problem(s) in \(path); the running pipeline is unchanged")
        case .success(let config):
            // A service manager is told about the reload around this call (RELOADING=1, then READY=1).
            let outcome = await pipeline.reload(configuration: config)
            if outcome.status == .rejected { logger.warning("\(outcome)") }
        }
    }

    // MARK: - Plugins

    static func listPlugins(filter: String?, registry: PluginRegistry) {
        var out = ""
        let plugins = registry.all.filter { filter == nil || $0.info.type == filter }
        if plugins.isEmpty { fail("no plugin of type \"\(filter ?? "")\"", code: 2) }
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
    static func install(pipeline: Pipeline, logger: Logger) -> [any DispatchSourceSignal] {
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
    private let value = Mutex(0)
    func increment() -> Int { value.withLock { $0 += 1; return $0 } }
}
