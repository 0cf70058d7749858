import DeviceCommands
import GatewayCore
import Locking
import Synchronization

/// A running pipeline built from a validated configuration.
///
/// ```
///  source task ──emit(batch)──▶ transform ─▶ transform ──▶ [SinkBuffer] ──▶ sink task
///       │     (reads the current    (inline, under the        bounded,
///       │      routing table once    transform's lock)        block | drop_oldest
///       └───── per batch) ─────────────────────────────────▶ [SinkBuffer] ──▶ sink task
///
///  supervisor (the body of `run`): starts and stops component tasks, swaps the routing table
/// ```
///
/// Rules:
/// - End-to-end acknowledgements: a batch emitted with `whenHandled` is acknowledged once every
///   sink buffer that received it (or positions transforms derived from it) was acknowledged by
///   its sink, which does so only after taking responsibility (committed to its outbox, written
///   and flushed). Positions a transform holds and releases later (at a tick or at the end) are
///   not tied to the acknowledgement of the batch they came in.
/// - One task per source and per sink, all children of one task group owned by the supervisor;
///   no unstructured tasks. The supervisor is the only place that starts or stops components.
/// - Transforms run inline on the emitting source's task, one call at a time per transform, so a
///   position crosses exactly one async hop (the sink buffer) between source and sink.
/// - Positions move in batches. Every buffer is bounded; its overflow policy is named.
/// - A source looks up the routing table once per batch (one lock) and follows that table for
///   the whole batch, transforms included: a batch goes wholly along the old routes or wholly
///   along the new ones, never half and half.
/// - Shutdown is ordered: sources stop (input ended, a signal, or a failed component), transforms
///   release held positions (`finish`), sink buffers close, sinks drain and flush within
///   `shutdown_timeout`, after which they are cancelled. After a signal or a failure, sinks
///   whose queue is durable stop without draining (``SinkInput/stopRequest``).
///
/// Live reload (``reload(configuration:)``) compares components by id and restarts only those
/// whose type, options, inputs or buffer changed; unchanged ones keep their task, connection,
/// queue and per-device state. It goes in this order, so no accepted position is lost or
/// delivered twice:
///
/// ```
///  1. build new components           (a failure here changes nothing)
///  2. stop changed/removed sources   (their last batches go along the old routes)
///  3. swap the routing table ──────▶ new batches go to new transforms / new sink buffers;
///     start new sources               a replacement sink's buffer fills but is not read yet
///  4. wait for batches still on the old routes to arrive
///  5. finish changed/removed transforms into their old routes
///  6. close old sink buffers; old sinks drain, acknowledge and return (within shutdown_timeout)
///  7. start replacement sinks        (they read everything since the swap, in order)
/// ```
///
/// Rule: a replaced sink's old instance has handled everything it received before its
/// replacement reads anything, and the replacement receives everything from the swap on. A
/// replacement that claims what the old instance holds (the same queue or file) is even built
/// only after the old one closed it.
///
/// Where each part lives: building components (PipelineBuilder.swift, PipelineNodes.swift),
/// routing batches (Routing.swift, RoutingTable.swift), the supervisor's phases
/// (PipelineSupervisor.swift) and the tasks it starts (PipelineTasks.swift), reload
/// (ReloadPlan.swift decides, PipelineReload.swift applies).
public final class Pipeline: Sendable {
    enum Command: Sendable {
        case reload(PipelineConfiguration, CheckedContinuation<ReloadOutcome, Never>)
        case sourceEnded(SourceHandle)
        case sinkEnded(SinkHandle)
        case shutdown
    }

    /// The running components; changed only by the supervisor.
    let topology: Locked<Topology>
    let routing: Routing
    private let commands: AsyncStream<Command>
    let mailbox: AsyncStream<Command>.Continuation
    /// The settings in effect: a reload changes those that apply live, the others wait for a restart.
    let settings: Locked<PipelineConfiguration.Settings>
    /// Where the components' tasks run (`settings.threads`; a reload does not change it).
    let threads: PipelineThreads
    let logger: Logger
    let builder: PipelineBuilder
    var clock: any GatewayClock { builder.clock }
    var observer: (any PipelineObserver)? { builder.observer }
    /// Fired by ``shutdown(reason:)``: a signal, or a component that failed.
    let trigger = ShutdownTrigger()
    let failed = Atomic<Bool>(false)
    let drain: Drain
    let drainTimedOut = Atomic<Bool>(false)

    /// What happens once every source has ended on its own (a finite replay).
    public enum Drain: Sendable, Equatable {
        /// Sinks get `shutdown_timeout` to deliver what they hold; the rest stays queued.
        case off
        /// Sinks get until their queues are empty (`run --drain`): at most `timeout`, or for as
        /// long as it takes when nil. A signal falls back to `shutdown_timeout`.
        case untilEmpty(timeout: Duration?)
    }

    /// The exit status of a `run --drain` whose timeout passed with positions still queued.
    public static let drainTimeoutStatus: Int32 = 3
    /// The handle of the current stats reporter and tick loop (restarted when a reload changes them).
    let auxiliary = Locked<(stats: ShutdownTrigger, ticks: ShutdownTrigger)>((ShutdownTrigger(), ShutdownTrigger()))

    /// Statistics of every running component: sources, transforms (inputs first), sinks.
    public var componentStats: [ComponentStats] {
        topology.withLock { t in
            t.configuration.sources.compactMap { t.sources[$0.id]?.stats }
                + Pipeline.topologicalOrder(t.configuration.transforms).compactMap { t.transforms[$0.id]?.stats }
                + t.configuration.sinks.compactMap { t.sinks[$0.id]?.stats }
        }
    }

    /// Builds every component; throws the first component that cannot be built (exit 1).
    public init(configuration: PipelineConfiguration, logHandler: any LogHandler, clock: any GatewayClock = .system,
                drain: Drain = .off, observer: (any PipelineObserver)? = nil) throws {
        self.settings = Locked(configuration.settings)
        self.threads = PipelineThreads(count: configuration.settings.threads)
        self.drain = drain
        self.logger = Logger(label: "pipeline", handler: logHandler)
        (commands, mailbox) = AsyncStream<Command>.makeStream()
        let builder = PipelineBuilder(logHandler: logHandler, clock: clock, observer: observer)
        self.builder = builder
        let built = try builder.build(configuration)
        self.stateStore = built.stateStore
        self.deviceCommands = built.commands
        let table = Pipeline.makeTable(built.topology)
        for c in configuration.sources where table.sources[c.id]?.isEmpty ?? true {
            built.topology.sources[c.id]?.logger.warning("feeds nothing: no transform or sink lists it in inputs")
        }
        self.topology = Locked(built.topology)
        self.routing = Routing(table)
        self.initialSinks = Locked(built.sinks)
    }

    /// Sinks built by `init`, handed to their tasks when `run` starts.
    private let initialSinks: Locked<[String: any PositionSink]>
    /// Where stateful transforms keep per-device state (`settings.state`); nil: in memory only.
    let stateStore: (any DeviceStateStore)?
    /// The gateway's commands to devices (the operator API serves them); nil when no component uses them.
    public let deviceCommands: CommandBoard?

    /// Asks the pipeline to stop gracefully (what SIGINT/SIGTERM do).
    public func shutdown(reason: String) {
        trigger.fire(reason: reason)
        mailbox.yield(.shutdown)
    }

    /// Releases what building the pipeline opened, for one that will not run (the operator API
    /// could not start): its threads, and the state store with its lock. Its sinks' queues close
    /// as the sinks are freed; nothing was delivered, so nothing is lost.
    public func discard() {
        threads.stop()
        stateStore?.close()
        deviceCommands?.close()
    }

    /// Runs until every source has ended or shutdown was requested; returns the exit status
    /// (0, or 1 when a component failed). A `monitor` hears that every component started, and
    /// the heartbeat while the pipeline runs (see ``PipelineMonitor``).
    ///
    /// The components run on the pipeline's threads (``PipelineThreads``); this supervisor, the
    /// heartbeat, the stats line and the shutdown deadlines on the global pool, so a component
    /// that blocks its thread is still reported, and still cancelled at the deadline.
    public func run(monitor: (any PipelineMonitor)? = nil) async -> Int32 {
        defer { threads.stop() }
        let (sourceCount, transformCount, sinkCount) = topology.withLock { ($0.sources.count, $0.transforms.count, $0.sinks.count) }
        logger.info("starting: \(sourceCount) source(s), \(transformCount) transform(s), \(sinkCount) sink(s)")
        var commandsIterator = commands.makeAsyncIterator()
        var supervisor = PipelineSupervisor()
        await withDiscardingTaskGroup { group in
            let t = topology.withLock { $0 }
            let built = initialSinks.withLock { b in defer { b = [:] }; return b }
            for c in t.configuration.sinks {
                if let h = t.sinks[c.id], let sink = built[c.id] { start(h, sink: sink, in: &group) }
            }
            for c in t.configuration.sources { if let h = t.sources[c.id] { start(h, in: &group) } }
            restartTicks(in: &group)
            restartStats(in: &group)
            if logger.isEnabled(.debug) { group.addTask { await self.reportSourceProgress() } }
            if let monitor { group.addTask { await self.runHeartbeat(monitor) } }
            perform(supervisor.event(.started(sources: t.sources.count)), in: &group)
            while !supervisor.isDone(everySinkEnded: topology.withLock({ $0.sinks.values.allSatisfy { $0.ended.isFired } })) {
                guard let command = await commandsIterator.next() else { break }
                switch command {
                case .shutdown:
                    let live = topology.withLock { $0.sources.values.filter { !$0.ended.isFired } }
                    perform(supervisor.event(.shutdownRequested(sourcesRunning: !live.isEmpty)), running: live, in: &group)
                case .sourceEnded(let h):
                    // A source a reload replaced is no longer in the topology and ends nothing.
                    let last = topology.withLock { t in
                        t.sources[h.component.id] === h && t.sources.values.allSatisfy { $0.ended.isFired }
                    }
                    perform(supervisor.event(.sourceEnded(last: last)), in: &group)
                case .sinkEnded:
                    // Wakes the loop to check whether every sink has ended.
                    break
                case .reload(let configuration, let reply):
                    if case .rejectReload(let problem) = supervisor.event(.reloadRequested) {
                        reply.resume(returning: ReloadOutcome(status: .rejected, problem: problem))
                    } else {
                        reply.resume(returning: await apply(configuration, in: &group))
                    }
                }
            }
            // The stats reporter, the tick loop and a pending deadline end with the pipeline.
            group.cancelAll()
        }
        mailbox.finish()
        _ = supervisor.event(.stopped)
        // After the sinks: the last acknowledgements have saved their state.
        stateStore?.close()
        deviceCommands?.close()
        // Reloads requested while the pipeline stopped get an answer, not a hang.
        while let command = await commandsIterator.next() {
            if case .reload(_, let reply) = command, case .rejectReload(let problem) = supervisor.event(.reloadRequested) {
                reply.resume(returning: ReloadOutcome(status: .rejected, problem: problem))
            }
        }
        logStats()
        let code: Int32 = failed.load(ordering: .relaxed) ? 1 : drainTimedOut.load(ordering: .relaxed) ? Pipeline.drainTimeoutStatus : 0
        logger.info("stopped\(code == 1 ? " after a failure" : code == Pipeline.drainTimeoutStatus ? " with positions still queued" : "")")
        return code
    }

    /// Performs what the supervisor decided; `running` are the sources a shutdown stops.
    private func perform(_ action: PipelineSupervisor.Action, running: [SourceHandle] = [], in group: inout DiscardingTaskGroup) {
        switch action {
        case .none:
            break
        case .applyReload, .rejectReload:
            // Answered in the loop, which holds the reload's configuration and reply.
            break
        case .stopSinks:
            stopSinks(in: &group)
        case .shutDown(let then):
            // Sinks whose queue is durable stop without waiting for delivery once what they
            // received is committed (their input has ended), a `--drain` included; the others
            // deliver until the deadline.
            for h in topology.withLock({ Array($0.sinks.values) }) { h.buffer.stopNow.fire(reason: "shutdown") }
            switch then {
            case .nothingMore:
                break
            case .stopSources:
                if let reason = trigger.reason { logger.info("shutting down: \(reason)") }
                for h in running { h.stop.fire(reason: "shutdown") }
            case .stopSinks:
                stopSinks(in: &group)
            }
        }
    }
}
