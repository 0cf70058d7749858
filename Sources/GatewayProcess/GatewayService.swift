import Foundation
import GatewayCore
import GatewayRuntime
import OperatorEndpoints

/// A pipeline run as a service: signals, live reload from its file, the operator API, systemd's
/// notifications and the exit status, around ``Pipeline/run(monitor:)``.
///
/// The command line parses arguments and loads the configuration; what a running gateway does
/// with its process is here, apart from the parsing, so it can be read (and changed) in one place:
///
/// ```
///  build the pipeline ──(fails: 1)──▶ start the operator API ──(fails: 1)──▶ handle signals, run
///    READY=1 once every component started; WATCHDOG=1 while it makes progress
///    SIGHUP          RELOADING=1, re-read and validate the file, apply it if valid, READY=1
///    SIGINT/SIGTERM  STOPPING=1, graceful stop; a second signal exits 130 at once
///  pipeline ended ──▶ stop the API, STOPPING=1 ──▶ the pipeline's status (0, 1, or 3 after --drain)
/// ```
///
/// Outside systemd (`NOTIFY_SOCKET` unset) nothing is notified and no heartbeat runs.
public struct GatewayService: Sendable {
    public let configuration: PipelineConfiguration
    /// The file SIGHUP re-reads; nil when there is none (the demo), and SIGHUP only says so.
    public let configurationFile: String?
    let registry: PluginRegistry
    let logHandler: any LogHandler
    let drain: Pipeline.Drain
    /// Shown by the operator API.
    let version: String

    public init(configuration: PipelineConfiguration, configurationFile: String?, registry: PluginRegistry,
                logHandler: any LogHandler, drain: Pipeline.Drain = .off, version: String) {
        self.configuration = configuration
        self.configurationFile = configurationFile
        self.registry = registry
        self.logHandler = logHandler
        self.drain = drain
        self.version = version
    }

    /// Runs the pipeline until it ends or a signal stops it; returns the process's exit status.
    /// A second SIGINT/SIGTERM exits the process at once (130) without returning.
    public func run() async -> Int32 {
        let pipeline: Pipeline
        let monitor = configuration.api.map { PipelineActivity(tail: $0.mapTail) }
        do {
            pipeline = try Pipeline(configuration: configuration, logHandler: logHandler, drain: drain, observer: monitor)
        } catch {
            Logger(label: "locgate", handler: logHandler).error("\(error)")
            return 1
        }
        let api: OperatorAPI?
        if let settings = configuration.api, let monitor {
            let server = OperatorAPI(settings: settings, configuration: configuration, stats: pipeline.componentStats, monitor: monitor, version: version,
                                     commands: pipeline.deviceCommands)
            do {
                try server.start(logger: Logger(label: "api", handler: logHandler))
            } catch {
                Logger(label: "api", handler: logHandler).error("cannot start the operator API: \(error)")
                pipeline.discard()
                return 1
            }
            api = server
        } else {
            api = nil
        }
        let logger = Logger(label: "locgate", handler: logHandler)
        let notifier = SystemdNotifier.fromEnvironment(logger: logger.child("systemd"))
        let signalSources = SignalHandling.install(pipeline: pipeline, notifier: notifier, logger: logger)
        let (hangups, hangupSource) = SignalHandling.hangups()
        let code = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await pipeline.run(monitor: notifier) }
            group.addTask {
                for await _ in hangups {
                    guard let configurationFile else {
                        logger.warning("SIGHUP: the demo has no configuration file to reload")
                        continue
                    }
                    await reload(configurationFile, pipeline: pipeline, api: api, notifier: notifier, logger: logger)
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
        return code
    }

    /// SIGHUP: validates the file exactly as `locgate validate` does; applies it only when it is
    /// valid, else logs every problem (one line each, with its JSON path) and keeps the running
    /// pipeline.
    func reload(_ path: String, pipeline: Pipeline, api: OperatorAPI?, notifier: SystemdNotifier?, logger: Logger) async {
        logger.info("SIGHUP: reloading \(path)")
        // systemd shows the unit as reloading until READY=1 follows, whatever the outcome.
        notifier?.reloading()
        defer { notifier?.ready() }
        switch GatewayService.readConfiguration(path, registry: registry) {
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

    /// Reads and validates a pipeline file: what `locgate validate`, `locgate run` and a reload
    /// share, so a file a reload accepts is one `validate` accepts.
    public static func readConfiguration(_ path: String, registry: PluginRegistry) -> Result<PipelineConfiguration, ConfigurationError> {
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
}
