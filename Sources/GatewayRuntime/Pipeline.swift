import GatewayCore
import Locking
import Outbox
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
public final class Pipeline: Sendable {
    /// Where a batch goes next.
    indirect enum Route: Sendable {
        case transform(TransformNode, [Route])
        case sink(SinkBuffer)
    }

    final class TransformNode: Sendable {
        let id: String
        let stats: ComponentStats
        let tickInterval: Duration?
        /// Calls in progress, for the heartbeat's wedge detection (PipelineHeartbeat.swift).
        let activity = ActivityProbe()
        private let transform: Locked<any PositionTransform>
        private let observer: (any PipelineObserver)?
        /// Saves the per-device state of a stateful transform (TransformStateKeeper.swift).
        let keeper: TransformStateKeeper?

        init(id: String, transform: sending any PositionTransform, stats: ComponentStats, observer: (any PipelineObserver)? = nil,
             keeper: TransformStateKeeper? = nil) {
            self.id = id
            self.stats = stats
            self.observer = observer
            self.keeper = keeper
            self.tickInterval = transform.tickInterval
            self.transform = Locked(transform)
        }

        /// The batch through the transform, and the state it changed (saved by the caller, which
        /// knows the batch's acknowledgement).
        func process(_ batch: consuming [Position]) -> (positions: [Position], changes: [(device: String, state: JSONValue?)]) {
            var out = batch
            var changes: [(device: String, state: JSONValue?)] = []
            stats.addReceived(out.count)
            activity.enter(); defer { activity.exit() }
            transform.withLock { t in
                t.process(batch: &out)
                if keeper != nil { changes = t.takeStateChanges() }
            }
            stats.addEmitted(out.count)
            observe(out)
            return (out, changes)
        }

        func tick(now: Timestamp) -> [Position] {
            var out: [Position] = []
            activity.enter(); defer { activity.exit() }
            let changes = transform.withLock { t in
                t.tick(now: now, into: &out)
                return keeper != nil ? t.takeStateChanges() : []
            }
            if !changes.isEmpty { keeper?.save(changes, when: nil) }
            stats.addEmitted(out.count)
            observe(out)
            return out
        }

        func finish() -> [Position] {
            var out: [Position] = []
            activity.enter(); defer { activity.exit() }
            let changes = transform.withLock { t in
                t.finish(into: &out)
                return keeper != nil ? t.takeStateChanges() : []
            }
            if !changes.isEmpty { keeper?.save(changes, when: nil) }
            stats.addEmitted(out.count)
            observe(out)
            return out
        }

        private func observe(_ out: [Position]) {
            if let observer, !out.isEmpty { observer.transformEmitted(id, out) }
        }
    }

    /// A running source and what stops it.
    final class SourceHandle: Sendable {
        let component: PipelineConfiguration.Component
        let source: any PositionSource
        let stats: ComponentStats
        let logger: Logger
        let stop = ShutdownTrigger()
        let ended = ShutdownTrigger()

        init(component: PipelineConfiguration.Component, source: any PositionSource, stats: ComponentStats, logger: Logger) {
            self.component = component
            self.source = source
            self.stats = stats
            self.logger = logger
        }
    }

    /// A sink's buffer and the controls of its task (the sink itself is handed to the task).
    final class SinkHandle: Sendable {
        let component: PipelineConfiguration.Component
        let buffer: SinkBuffer
        let stats: ComponentStats
        let logger: Logger
        /// Fired when the drain deadline passed: the sink's task is cancelled.
        let cancel = ShutdownTrigger()
        let ended = ShutdownTrigger()

        init(component: PipelineConfiguration.Component, stats: ComponentStats, logger: Logger) {
            self.component = component
            self.buffer = SinkBuffer(capacity: component.buffer.maxPositions, policy: component.buffer.whenFull,
                                     durable: component.prepared.durable, stats: stats)
            self.stats = stats
            self.logger = logger
        }
    }

    /// The components of the current configuration, ended ones included (their stats stay
    /// readable); changed only by the supervisor.
    struct Topology: Sendable {
        var configuration: PipelineConfiguration
        var sources: [String: SourceHandle] = [:]
        var transforms: [String: TransformNode] = [:]
        var sinks: [String: SinkHandle] = [:]
    }

    enum Command: Sendable {
        case reload(PipelineConfiguration, CheckedContinuation<ReloadOutcome, Never>)
        case sourceEnded(SourceHandle)
        case sinkEnded(SinkHandle)
        case shutdown
    }

    private let topology: Locked<Topology>
    private let routing: Routing
    private let commands: AsyncStream<Command>
    private let mailbox: AsyncStream<Command>.Continuation
    private let settings: Locked<PipelineConfiguration.Settings>
    /// Where the components' tasks run (`settings.threads`; a reload does not change it).
    let threads: PipelineThreads
    let logger: Logger
    private let logHandler: any LogHandler
    private let clock: any GatewayClock
    private let trigger = ShutdownTrigger()
    private let failed = Atomic<Bool>(false)
    private let observer: (any PipelineObserver)?
    private let drain: Drain
    private let drainTimedOut = Atomic<Bool>(false)

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
    private let auxiliary = Locked<(stats: ShutdownTrigger, ticks: ShutdownTrigger)>((ShutdownTrigger(), ShutdownTrigger()))

    /// Statistics of every running component: sources, transforms (inputs first), sinks.
    public var componentStats: [ComponentStats] {
        topology.withLock { t in
            t.configuration.sources.compactMap { t.sources[$0.id]?.stats }
                + Pipeline.topologicalOrder(t.configuration.transforms).compactMap { t.transforms[$0.id]?.stats }
                + t.configuration.sinks.compactMap { t.sinks[$0.id]?.stats }
        }
    }

    /// Builds every component; throws the first component that cannot be built (exit 1).
    public init(configuration: PipelineConfiguration, logHandler: any LogHandler, clock: any GatewayClock = SystemClock(),
                drain: Drain = .off, observer: (any PipelineObserver)? = nil) throws {
        self.settings = Locked(configuration.settings)
        self.threads = PipelineThreads(count: configuration.settings.threads)
        self.drain = drain
        self.observer = observer
        self.clock = clock
        self.logHandler = logHandler
        self.logger = Logger(label: "pipeline", handler: logHandler)
        (commands, mailbox) = AsyncStream<Command>.makeStream()
        var t = Topology(configuration: configuration)
        var built: [String: any PositionSink] = [:]
        for c in configuration.sinks {
            let ctx = Pipeline.context(c, handler: logHandler, clock: clock)
            built[c.id] = try Pipeline.buildSink(c, ctx)
            t.sinks[c.id] = SinkHandle(component: c, stats: ctx.stats, logger: ctx.logger)
        }
        var transforms: [(PipelineConfiguration.Component, ComponentContext, any PositionTransform)] = []
        for c in configuration.transforms {
            let ctx = Pipeline.context(c, handler: logHandler, clock: clock)
            transforms.append((c, ctx, try Pipeline.buildTransform(c, ctx)))
        }
        let store = try Pipeline.openStateStore(configuration, needed: transforms.contains { ($0.2 as? any StatefulTransform)?.keepsState == true },
                                                clock: clock, logger: Logger(label: "state", handler: logHandler))
        self.stateStore = store
        for (c, ctx, built) in transforms {
            var transform = built
            let keeper = TransformStateKeeper.restore(&transform, id: c.id, store: store, context: ctx)
            t.transforms[c.id] = TransformNode(id: c.id, transform: transform, stats: ctx.stats, observer: observer, keeper: keeper)
        }
        for c in configuration.sources {
            let ctx = Pipeline.context(c, handler: logHandler, clock: clock)
            t.sources[c.id] = SourceHandle(component: c, source: try Pipeline.buildSource(c, ctx), stats: ctx.stats, logger: ctx.logger)
        }
        let table = Pipeline.makeTable(t)
        for c in configuration.sources where table.sources[c.id]?.isEmpty ?? true {
            t.sources[c.id]?.logger.warning("feeds nothing: no transform or sink lists it in inputs")
        }
        self.topology = Locked(t)
        self.routing = Routing(table)
        self.initialSinks = Locked(built)
    }

    /// Sinks built by `init`, handed to their tasks when `run` starts.
    private let initialSinks: Locked<[String: any PositionSink]>
    /// Where stateful transforms keep per-device state (`settings.state`); nil: in memory only.
    private let stateStore: (any DeviceStateStore)?

    /// Opens the state store when a transform keeps state and the configuration gives it a place:
    /// a backend registered beside the plugins (`state.nats`), opened through its factory so this
    /// module needs no client library of its own (``DeviceStateBackend``), or an SQLite file.
    static func openStateStore(_ configuration: PipelineConfiguration, needed: Bool, clock: any GatewayClock,
                               logger: Logger) throws -> (any DeviceStateStore)? {
        let settings = configuration.settings.state
        if needed, !settings.disabled, let backend = settings.backend {
            do {
                return try backend.open(settings, StateStoreContext(logger: logger, clock: clock))
            } catch {
                throw PipelineError(component: "settings.state.\(backend.key)", message: "cannot open the state store (\(backend.location)): \(error)")
            }
        }
        guard needed, let path = configuration.stateStorePath else { return nil }
        do {
            return try SQLiteStateStore(path: path, interval: settings.interval, maxAge: settings.maxAge, clock: clock) { logger.warning($0) }
        } catch {
            throw PipelineError(component: "settings.state", message: "cannot open the state store: \(error.path): \(error.message)")
        }
    }

    static func context(_ c: PipelineConfiguration.Component, handler: any LogHandler, clock: any GatewayClock,
                        stats: ComponentStats? = nil) -> ComponentContext {
        ComponentContext(id: c.id, kind: c.kind, logger: Logger(label: c.path, handler: handler),
                         stats: stats ?? ComponentStats(id: c.path), clock: clock)
    }

    private static func build(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> BuiltComponent {
        do { return try c.prepared.build(ctx) } catch {
            throw PipelineError(component: c.path, message: "cannot start: \(error)")
        }
    }

    static func buildSource(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> any PositionSource {
        guard case .source(let s) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
        return s
    }

    static func buildTransform(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> any PositionTransform {
        guard case .transform(let t) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
        return t
    }

    static func buildSink(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> any PositionSink {
        guard case .sink(let s) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
        return s
    }

    static func topologicalOrder(_ transforms: [PipelineConfiguration.Component]) -> [PipelineConfiguration.Component] {
        let ids = Set(transforms.map(\.id))
        var placed = Set<String>()
        var order: [PipelineConfiguration.Component] = []
        var remaining = transforms
        while !remaining.isEmpty {
            let before = remaining.count
            remaining.removeAll { t in
                let ready = t.inputs.allSatisfy { !ids.contains($0) || placed.contains($0) }
                if ready { placed.insert(t.id); order.append(t) }
                return ready
            }
            if remaining.count == before { order += remaining; break }  // a cycle: validation rejects it
        }
        return order
    }

    /// The routes out of every source and transform, from the running transforms and sink buffers.
    static func makeTable(_ t: Topology) -> RoutingTable {
        let order = topologicalOrder(t.configuration.transforms)
        var memo: [String: [Route]] = [:]
        var visiting = Set<String>()
        func routes(from id: String) -> [Route] {
            if let m = memo[id] { return m }
            // A cycle (rejected by validation) must not recurse forever.
            guard visiting.insert(id).inserted else { return [] }
            var r: [Route] = []
            for c in order where c.inputs.contains(id) {
                if let n = t.transforms[c.id] { r.append(.transform(n, routes(from: c.id))) }
            }
            for c in t.configuration.sinks where c.inputs.contains(id) {
                if let h = t.sinks[c.id] { r.append(.sink(h.buffer)) }
            }
            visiting.remove(id)
            memo[id] = r
            return r
        }
        var sources: [String: [Route]] = [:]
        for c in t.configuration.sources { sources[c.id] = routes(from: c.id) }
        var transforms: [(TransformNode, [Route])] = []
        for c in order { if let n = t.transforms[c.id] { transforms.append((n, routes(from: c.id))) } }
        return RoutingTable(sources: sources, transforms: transforms)
    }

    /// Asks the pipeline to stop gracefully (what SIGINT/SIGTERM do).
    public func shutdown(reason: String) {
        trigger.fire(reason: reason)
        mailbox.yield(.shutdown)
    }

    // MARK: - Supervisor

    private enum Phase { case running, stoppingSources, stoppingSinks }

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
            var phase = Phase.running
            if t.sources.isEmpty { phase = stopSinks(in: &group) }
            while !(phase == .stoppingSinks && topology.withLock({ $0.sinks.values.allSatisfy { $0.ended.isFired } })) {
                guard let command = await commandsIterator.next() else { break }
                switch command {
                case .shutdown:
                    // Sinks whose queue is durable stop without waiting for delivery once what
                    // they received is committed (their input has ended), a `--drain` included;
                    // the others deliver until the deadline.
                    for h in topology.withLock({ Array($0.sinks.values) }) { h.buffer.stopNow.fire(reason: "shutdown") }
                    guard phase == .running else { continue }
                    phase = .stoppingSources
                    let live = topology.withLock { $0.sources.values.filter { !$0.ended.isFired } }
                    if let reason = trigger.reason, !live.isEmpty { logger.info("shutting down: \(reason)") }
                    for h in live { h.stop.fire(reason: "shutdown") }
                    if live.isEmpty { phase = stopSinks(in: &group) }
                case .sourceEnded(let h):
                    // A source a reload replaced is no longer in the topology and ends nothing.
                    let noneLeft = topology.withLock { t in
                        t.sources[h.component.id] === h && t.sources.values.allSatisfy { $0.ended.isFired }
                    }
                    if noneLeft && phase != .stoppingSinks { phase = stopSinks(in: &group) }
                case .sinkEnded:
                    break
                case .reload(let configuration, let reply):
                    if phase == .running {
                        reply.resume(returning: await apply(configuration, in: &group))
                    } else {
                        reply.resume(returning: ReloadOutcome(status: .rejected, problem: "the pipeline is stopping"))
                    }
                }
            }
            // The stats reporter, the tick loop and a pending deadline end with the pipeline.
            group.cancelAll()
        }
        mailbox.finish()
        // After the sinks: the last acknowledgements have saved their state.
        stateStore?.close()
        // Reloads requested while the pipeline stopped get an answer, not a hang.
        while let command = await commandsIterator.next() {
            if case .reload(_, let reply) = command { reply.resume(returning: ReloadOutcome(status: .rejected, problem: "the pipeline has stopped")) }
        }
        logStats()
        let code: Int32 = failed.load(ordering: .relaxed) ? 1 : drainTimedOut.load(ordering: .relaxed) ? Pipeline.drainTimeoutStatus : 0
        logger.info("stopped\(code == 1 ? " after a failure" : code == Pipeline.drainTimeoutStatus ? " with positions still queued" : "")")
        return code
    }

    /// Every source has ended: transforms release what they hold, sink buffers close, and the
    /// sinks get `shutdown_timeout` to drain.
    private func stopSinks(in group: inout DiscardingTaskGroup) -> Phase {
        let table = routing.acquire()
        for (node, routes) in table.transforms {
            // Held positions go only to sinks' buffers here: they are still open, and routes are
            // followed synchronously through later transforms.
            let out = node.finish()
            if !out.isEmpty { Pipeline.routeSynchronously(out, to: routes) }
        }
        table.leave()
        let sinks = topology.withLock { $0.sinks.values.filter { !$0.ended.isFired } }
        for h in sinks { h.buffer.close() }
        let timeout = settings.withLock { $0.shutdownTimeout }
        // `run --drain` applies only when the sources ended on their own, not after a signal or a failure.
        let drainLimit: Duration?? = if case .untilEmpty(let limit) = drain, !trigger.isFired { .some(limit) } else { nil }
        group.addTask { [logger] in
            if let limit = drainLimit {
                logger.info("sources ended; draining: waiting until every queue is empty\(limit.map { " (at most \(DurationText.format($0)))" } ?? "")")
                if await self.waitForSignal(atMost: limit) == false {
                    let late = sinks.filter { !$0.ended.isFired }
                    guard !Task.isCancelled, !late.isEmpty else { return }
                    let queued = late.reduce(0) { $0 + $1.stats.value("queue.depth") + $1.buffer.depth }
                    logger.warning("drain timeout of \(limit.map { DurationText.format($0) } ?? "") passed with \(queued) position(s) still queued in \(late.count) sink(s)")
                    self.drainTimedOut.store(true, ordering: .relaxed)
                    for h in late { h.cancel.fire(reason: "drain timeout") }
                    return
                }
                guard !Task.isCancelled else { return }
                logger.info("\(self.trigger.reason ?? "signal") while draining: sinks get \(DurationText.format(timeout)) to stop")
            }
            do { try await Task.sleep(for: timeout) } catch { return }
            let late = sinks.filter { !$0.ended.isFired }
            guard !late.isEmpty else { return }
            logger.warning("shutdown deadline of \(DurationText.format(timeout)) passed; cancelling \(late.count) sink(s)")
            for h in late { h.cancel.fire(reason: "deadline") }
        }
        return .stoppingSinks
    }

    /// Runs `body` until it returns or `stop` fires, which cancels it.
    private static func run(until stop: ShutdownTrigger, _ body: @escaping @Sendable () async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await body() }
            group.addTask { await stop.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    private func start(_ h: SourceHandle, in group: inout DiscardingTaskGroup) {
        let id = h.component.id
        group.addTask(executorPreference: threads) {
            let reorder = h.component.reorderWindow.map { ReorderWindow(window: $0) }
            if let reorder { h.stats.gauge("reorder.held") { reorder.held } }
            let output = SourceOutput(tracking: { batch, ack in
                h.stats.addEmitted(batch.count)
                self.observer?.sourceEmitted(id, batch)
                if let reorder {
                    reorder.add(batch, acknowledgement: ack, now: self.clock.now().milliseconds)
                } else {
                    await self.route(batch, fromSource: id, acknowledgement: ack, onConflict: { self.stopAfterStateConflict(h, $0) })
                }
            })
            await Pipeline.run(until: h.stop) {
                await withTaskGroup(of: Void.self) { releasing in
                    if let reorder { releasing.addTask { await self.releaseReordered(reorder, source: h) } }
                    do {
                        try await h.source.run(output: output)
                        h.logger.info("input ended")
                        self.observer?.sourceEnded(id, failed: false)
                    } catch is CancellationError {
                        h.logger.debug("stopped")
                    } catch {
                        if Task.isCancelled {
                            h.logger.debug("stopped: \(error)")
                        } else {
                            h.logger.error("failed: \(error)")
                            self.observer?.sourceEnded(id, failed: true)
                            self.failed.store(true, ordering: .relaxed)
                            self.shutdown(reason: "\(id) failed")
                        }
                    }
                    releasing.cancelAll()
                }
            }
            // What the window still holds goes now, in order, before the source counts as ended.
            if let reorder { await self.release(reorder, source: h, all: true) }
            h.ended.fire(reason: "ended")
            self.mailbox.yield(.sourceEnded(h))
        }
    }

    /// Releases a source's reorder window as its positions fall due (ReorderWindow.swift).
    private func releaseReordered(_ reorder: ReorderWindow, source h: SourceHandle) async {
        let step = max(Duration.milliseconds(10), reorder.window / 4)
        while !Task.isCancelled {
            do { try await clock.sleep(for: step) } catch { return }
            await release(reorder, source: h, all: false)
        }
    }

    private func release(_ reorder: ReorderWindow, source h: SourceHandle, all: Bool) async {
        let (positions, holds) = reorder.release(now: clock.now().milliseconds, all: all)
        guard !positions.isEmpty else { return }
        // One acknowledgement for what goes now: handled, it hands each position's share back
        // to the batch it came in.
        let acknowledgement = holds.isEmpty ? nil : BatchAcknowledgement { for h in holds { h.done() } }
        await route(positions, fromSource: h.component.id, acknowledgement: acknowledgement, onConflict: { self.stopAfterStateConflict(h, $0) })
        acknowledgement?.release()
    }

    private func start(_ h: SinkHandle, sink: any PositionSink, in group: inout DiscardingTaskGroup) {
        group.addTask(executorPreference: threads) {
            await Pipeline.run(until: h.cancel) {
                do {
                    try await sink.run(input: h.buffer)
                    h.logger.debug("flushed and stopped")
                } catch is CancellationError {
                    h.logger.warning("stopped at the shutdown deadline with \(h.buffer.depth) position(s) unflushed")
                } catch {
                    h.logger.error("failed: \(error)")
                    self.failed.store(true, ordering: .relaxed)
                    self.shutdown(reason: "\(h.component.id) failed")
                }
            }
            // A sink that stopped early must not leave its senders blocked.
            h.buffer.close()
            h.ended.fire(reason: "ended")
            self.mailbox.yield(.sinkEnded(h))
        }
    }

    // MARK: - Routing

    /// Sends a source's batch along the routes of the current table.
    private func route(_ batch: consuming [Position], fromSource id: String, acknowledgement: BatchAcknowledgement?,
                       onConflict: @escaping StateConflictHandler) async {
        let table = routing.acquire()
        if let routes = table.sources[id] { await Pipeline.route(batch, to: routes, acknowledgement: acknowledgement, onConflict: onConflict) }
        table.leave()
    }

    /// What a transform's state keeper calls when a shared state store refused a write because
    /// another gateway wrote the device's state meanwhile.
    typealias StateConflictHandler = @Sendable (DeviceStateStoreError) -> Void

    /// Another gateway owns devices this source feeds (issue 30: "the loser logs and stops that
    /// partition"): the source stops, so its broker hands its unacknowledged messages to whoever
    /// else reads the partition; the other sources go on. The batch that conflicted was
    /// delivered to the sinks and is acknowledged like any batch whose state could not be saved.
    private func stopAfterStateConflict(_ h: SourceHandle, _ conflict: DeviceStateStoreError) {
        guard !h.stop.isFired else { return }
        h.stats.count("state.conflict_stops")
        h.logger.error("stopping this source: another gateway wrote the state of devices it feeds (\(conflict.devices.prefix(5).joined(separator: ", "))); a partition must be read by one gateway only. The other sources go on; start it again (reload or restart) once the partition is settled")
        h.stop.fire(reason: "state conflict")
    }

    /// Sends a batch along each route: transforms inline, sinks through their buffers.
    ///
    /// An acknowledgement follows the batch and whatever transforms make of it (geofence events
    /// included): each sink buffer that receives positions retains it until its sink acknowledged
    /// them; what transforms drop needs nothing more.
    ///
    /// The last route gets the batch itself, earlier ones a copy: a transform changes its batch
    /// in place, which copies the positions only while another route still holds them.
    static func route(_ batch: consuming [Position], to routes: [Route], acknowledgement: BatchAcknowledgement? = nil,
                      onConflict: StateConflictHandler? = nil) async {
        guard let last = routes.last else { return }
        for r in routes.dropLast() { await send(copy batch, along: r, acknowledgement: acknowledgement, onConflict: onConflict) }
        await send(batch, along: last, acknowledgement: acknowledgement, onConflict: onConflict)
    }

    private static func send(_ batch: consuming [Position], along route: Route, acknowledgement: BatchAcknowledgement?,
                             onConflict: StateConflictHandler?) async {
        switch route {
        case .sink(let buffer):
            await buffer.send(batch, acknowledgement: acknowledgement)
        case .transform(let node, let next):
            let (out, changes) = node.process(batch)
            // With an acknowledgement, the state is saved once the batch is handled, before the
            // acknowledgement goes upstream; without one, once routing returned (a durable sink
            // has committed by then).
            if !changes.isEmpty, let acknowledgement { node.keeper?.save(changes, when: acknowledgement, onConflict: onConflict) }
            if !out.isEmpty { await Pipeline.route(out, to: next, acknowledgement: acknowledgement, onConflict: onConflict) }
            if !changes.isEmpty && acknowledgement == nil { node.keeper?.save(changes, when: nil, onConflict: onConflict) }
        }
    }

    /// Like `route`, for shutdown: sink buffers accept without waiting (the sinks are still draining).
    static func routeSynchronously(_ batch: consuming [Position], to routes: [Route]) {
        guard let last = routes.last else { return }
        for r in routes.dropLast() { sendSynchronously(copy batch, along: r) }
        sendSynchronously(batch, along: last)
    }

    private static func sendSynchronously(_ batch: consuming [Position], along route: Route) {
        switch route {
        case .sink(let buffer): buffer.enqueueWithoutWaiting(batch)
        case .transform(let node, let next):
            let (out, changes) = node.process(batch)
            if !out.isEmpty { routeSynchronously(out, to: next) }
            if !changes.isEmpty { node.keeper?.save(changes, when: nil) }
        }
    }

    /// (Re)starts the tick loop for the transforms of the current table that tick.
    private func restartTicks(in group: inout DiscardingTaskGroup) {
        let stop = ShutdownTrigger()
        auxiliary.withLock { a in a.ticks.fire(reason: "restart"); a.ticks = stop }
        let table = routing.peek()
        let ticking = table.transforms.filter { $0.0.tickInterval != nil }
        guard !ticking.isEmpty else { return }
        let step = ticking.compactMap(\.0.tickInterval).min() ?? .seconds(1)
        group.addTask(executorPreference: threads) {
            await Pipeline.run(until: stop) { await self.runTicks(step: step) }
        }
    }

    private func runTicks(step: Duration) async {
        var last: [ObjectIdentifier: Timestamp] = [:]
        while !Task.isCancelled {
            do { try await clock.sleep(for: step) } catch { return }
            let now = clock.now()
            let table = routing.acquire()
            for (node, routes) in table.transforms {
                guard let interval = node.tickInterval else { continue }
                if let l = last[ObjectIdentifier(node)], now.milliseconds - l.milliseconds < interval.milliseconds { continue }
                last[ObjectIdentifier(node)] = now
                let out = node.tick(now: now)
                if !out.isEmpty { await Pipeline.route(out, to: routes) }
            }
            table.leave()
        }
    }

    // MARK: - Stats

    /// The components the heartbeat samples (PipelineHeartbeat.swift): every source, every
    /// transform, and the sinks still running.
    func heartbeatView() -> (sources: [ComponentStats], transforms: [TransformNode], sinks: [(stats: ComponentStats, buffer: SinkBuffer)]) {
        topology.withLock { t in
            (t.sources.values.map(\.stats), Array(t.transforms.values),
             t.sinks.values.filter { !$0.ended.isFired }.map { ($0.stats, $0.buffer) })
        }
    }

    private func restartStats(in group: inout DiscardingTaskGroup) {
        let stop = ShutdownTrigger()
        auxiliary.withLock { a in a.stats.fire(reason: "restart"); a.stats = stop }
        guard let interval = settings.withLock({ $0.statsInterval }) else { return }
        group.addTask {
            await Pipeline.run(until: stop) {
                while !Task.isCancelled {
                    do { try await Task.sleep(for: interval) } catch { return }
                    self.logStats()
                }
            }
        }
    }

    /// Waits for a shutdown signal for at most `limit` (nil: no limit); true when it came (or
    /// the wait was cancelled).
    private func waitForSignal(atMost limit: Duration?) async -> Bool {
        guard let limit else {
            await trigger.wait()
            return true
        }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.trigger.wait(); return true }
            group.addTask { (try? await Task.sleep(for: limit)) != nil ? false : true }
            let first = await group.next() ?? true
            group.cancelAll()
            return first
        }
    }

    /// How often `--log-level debug` shows each source's progress.
    static let sourceProgressInterval: Duration = .seconds(5)

    /// At debug level: every few seconds, what each source has emitted so far and lately, so a
    /// pipeline that prints nothing shows which source is silent.
    private func reportSourceProgress() async {
        var last: [String: Int] = [:]
        while !Task.isCancelled {
            do { try await Task.sleep(for: Pipeline.sourceProgressInterval) } catch { return }
            let sources = topology.withLock { t in t.configuration.sources.compactMap { t.sources[$0.id] } }
            for h in sources {
                let emitted = h.stats.emitted
                h.logger.debug("progress: \(emitted) position(s) emitted, \(emitted - (last[h.component.id] ?? 0)) in the last \(DurationText.format(Pipeline.sourceProgressInterval))")
                last[h.component.id] = emitted
            }
        }
    }

    private func logStats() {
        guard logger.isEnabled(.info) else { return }
        for s in componentStats {
            var parts = ["in=\(s.received)", "out=\(s.emitted)"]
            if s.dropped > 0 { parts.append("dropped=\(s.dropped)") }
            for (name, value) in s.namedValues { parts.append("\(name)=\(value)") }
            logger.child("stats").info("\(s.id) \(parts.joined(separator: " "))")
        }
    }

    // MARK: - Reload

    /// Applies a new, already validated configuration to the running pipeline and returns what it
    /// did; see the type's documentation for the order. Components whose configuration did not
    /// change keep running untouched. When a new component cannot be built, nothing changes.
    ///
    /// The caller (the CLI on SIGHUP) validates the file first, the same way `locgate validate`
    /// does, and is where service-manager notifications go (`RELOADING=1` before, `READY=1` after).
    /// Reloads are applied one at a time; a reload after shutdown began is rejected.
    public func reload(configuration: PipelineConfiguration) async -> ReloadOutcome {
        await withCheckedContinuation { reply in
            if case .terminated = mailbox.yield(.reload(configuration, reply)) {
                reply.resume(returning: ReloadOutcome(status: .rejected, problem: "the pipeline has stopped"))
            }
        }
    }

    /// Runs on the supervisor: see ``reload(configuration:)``.
    private func apply(_ new: PipelineConfiguration, in group: inout DiscardingTaskGroup) async -> ReloadOutcome {
        let started = ContinuousClock.now
        let old = topology.withLock { $0 }
        let emittedBefore = old.sources.values.reduce(0) { $0 + $1.stats.emitted }
        var outcome = ReloadOutcome(status: .applied)

        // Settings: what can change live does; the rest waits for a restart.
        let oldSettings = settings.withLock { $0 }
        var settingsChanged = false
        if oldSettings.statsInterval != new.settings.statsInterval || oldSettings.shutdownTimeout != new.settings.shutdownTimeout {
            settings.withLock { s in
                s.statsInterval = new.settings.statsInterval
                s.shutdownTimeout = new.settings.shutdownTimeout
            }
            settingsChanged = true
            if oldSettings.statsInterval != new.settings.statsInterval { restartStats(in: &group) }
        }
        if oldSettings.logLevel != new.settings.logLevel {
            outcome.needsRestart.append("settings.log_level")
            logger.warning("settings.log_level changed: that needs a restart; kept \(oldSettings.logLevel?.name ?? "the level it started with")")
        }
        if oldSettings.state != new.settings.state {
            outcome.needsRestart.append("settings.state")
            logger.warning("settings.state changed: that needs a restart; the state store stays where it is")
        }
        if oldSettings.threads != new.settings.threads {
            outcome.needsRestart.append("settings.threads")
            logger.warning("settings.threads changed: that needs a restart; kept \(oldSettings.threads)")
        }

        // What changed, by JSON path (an id that moved between sections is removed and added).
        let oldByPath = Dictionary(old.configuration.components.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        let newPaths = Set(new.components.map(\.path))
        var changed = Set<String>(), added = Set<String>()
        for c in new.components {
            guard let was = oldByPath[c.path] else { added.insert(c.path); continue }
            if was.differs(from: c) { changed.insert(c.path) }
        }
        let removed = old.configuration.components.map(\.path).filter { !newPaths.contains($0) }
        outcome.unchanged = new.components.count - changed.count - added.count
        let replaced = changed.union(removed)
        outcome.restarted = new.components.map(\.path).filter { changed.contains($0) }
        outcome.added = new.components.map(\.path).filter { added.contains($0) }
        outcome.removed = removed
        if changed.isEmpty && added.isEmpty && removed.isEmpty {
            outcome.duration = ContinuousClock.now - started
            logger.info("reloaded: \(outcome.summary)\(settingsChanged ? " (settings applied)" : "")")
            return outcome
        }

        // 1. Build what is new. A sink that claims something a replaced sink holds (its queue, its
        //    file) is built once that one closed it.
        let stoppingClaims = Set(old.configuration.sinks.filter { replaced.contains($0.path) }.flatMap(\.prepared.claims))
        var newSources: [String: SourceHandle] = [:]
        var newNodes: [String: TransformNode] = [:]
        var newSinks: [String: (SinkHandle, (any PositionSink)?)] = [:]
        do {
            for c in new.transforms where changed.contains(c.path) || added.contains(c.path) {
                let ctx = context(c, reusing: old.transforms[c.id]?.stats, sameType: oldByPath[c.path]?.type == c.type)
                var transform = try Pipeline.buildTransform(c, ctx)
                // Starts from what the store holds: the state the replaced instance saved so far.
                let keeper = TransformStateKeeper.restore(&transform, id: c.id, store: stateStore, context: ctx)
                newNodes[c.id] = TransformNode(id: c.id, transform: transform, stats: ctx.stats, observer: observer, keeper: keeper)
            }
            for c in new.sources where changed.contains(c.path) || added.contains(c.path) {
                let ctx = context(c, reusing: old.sources[c.id]?.stats, sameType: oldByPath[c.path]?.type == c.type)
                newSources[c.id] = SourceHandle(component: c, source: try Pipeline.buildSource(c, ctx), stats: ctx.stats, logger: ctx.logger)
            }
            for c in new.sinks where changed.contains(c.path) || added.contains(c.path) {
                let ctx = context(c, reusing: old.sinks[c.id]?.stats, sameType: oldByPath[c.path]?.type == c.type)
                let deferred = !stoppingClaims.isDisjoint(with: c.prepared.claims)
                newSinks[c.id] = (SinkHandle(component: c, stats: ctx.stats, logger: ctx.logger), deferred ? nil : try Pipeline.buildSink(c, ctx))
            }
        } catch {
            logger.error("reload failed, kept the running pipeline: \(error)")
            return ReloadOutcome(status: .failed, problem: "\(error)", duration: ContinuousClock.now - started)
        }

        // 2. Stop replaced sources; what they emit until then goes along the old routes.
        let stoppingSources = old.configuration.sources.filter { replaced.contains($0.path) }.compactMap { old.sources[$0.id] }
        topology.withLock { t in for h in stoppingSources { t.sources[h.component.id] = nil } }
        for h in stoppingSources { h.stop.fire(reason: "reload") }
        for h in stoppingSources { await h.ended.wait() }

        // 3. Swap the routing table and start new sources.
        var next = Topology(configuration: new)
        for c in new.sources { next.sources[c.id] = newSources[c.id] ?? old.sources[c.id] }
        for c in new.transforms { next.transforms[c.id] = newNodes[c.id] ?? old.transforms[c.id] }
        for c in new.sinks { next.sinks[c.id] = newSinks[c.id]?.0 ?? old.sinks[c.id] }
        // An unchanged source or sink that ended on its own (input ended, failed) is not brought back.
        let table = Pipeline.makeTable(next)
        topology.withLock { $0 = next }
        let oldTable = routing.swap(table)
        for c in new.sources {
            guard let h = newSources[c.id] else { continue }
            if table.sources[c.id]?.isEmpty ?? true { h.logger.warning("feeds nothing: no transform or sink lists it in inputs") }
            start(h, in: &group)
        }
        restartTicks(in: &group)

        // 4. Batches that took the old table before the swap finish along it.
        await oldTable.retire()

        // 5. Replaced transforms release what they hold into their old routes (old sinks still read).
        for (node, routes) in oldTable.transforms where replaced.contains("transforms.\(node.id)") && old.transforms[node.id] === node {
            let out = node.finish()
            if !out.isEmpty { Pipeline.routeSynchronously(out, to: routes) }
        }

        // 6. Old sinks drain and acknowledge what they hold, within shutdown_timeout.
        let stoppingSinks = old.configuration.sinks.filter { replaced.contains($0.path) }.compactMap { old.sinks[$0.id] }
        for h in stoppingSinks { h.buffer.close() }
        if !stoppingSinks.isEmpty {
            let timeout = settings.withLock { $0.shutdownTimeout }
            await withTaskGroup(of: Void.self) { drain in
                drain.addTask { for h in stoppingSinks { await h.ended.wait() } }
                drain.addTask { [logger] in
                    do { try await Task.sleep(for: timeout) } catch { return }
                    logger.warning("reload: replaced sinks did not drain within \(DurationText.format(timeout)); cancelling them")
                    for h in stoppingSinks { h.cancel.fire(reason: "deadline") }
                }
                await drain.next()
                drain.cancelAll()
            }
            for h in stoppingSinks { await h.ended.wait() }
        }

        // 7. Replacement and added sinks start reading.
        for c in new.sinks {
            guard let (h, prebuilt) = newSinks[c.id] else { continue }
            if let sink = prebuilt {
                start(h, sink: sink, in: &group)
                continue
            }
            let ctx = context(c, reusing: h.stats, sameType: true)
            do {
                start(h, sink: try Pipeline.buildSink(c, ctx), in: &group)
            } catch {
                // The old instance is gone: run the previous configuration again rather than lose
                // what the new buffer holds; a sink with no previous configuration cannot.
                if let previous = oldByPath[c.path], previous.kind == .sink,
                   let sink = try? Pipeline.buildSink(previous, context(previous, reusing: h.stats, sameType: true)) {
                    logger.error("reload: \(error); \(c.path) runs with its previous configuration")
                    start(h, sink: sink, in: &group)
                    topology.withLock { t in
                        if let i = t.configuration.sinks.firstIndex(where: { $0.id == c.id }) { t.configuration.sinks[i] = previous }
                    }
                } else {
                    logger.error("reload: \(error); positions routed to \(c.path) since the reload are dropped")
                    h.buffer.close()
                    h.ended.fire(reason: "failed")
                    outcome.status = .failed
                    outcome.problem = "\(error)"
                }
            }
        }
        outcome.duration = ContinuousClock.now - started
        // A restarted source of the same type shares its predecessor's counters: count each once.
        var counters: [ObjectIdentifier: ComponentStats] = [:]
        for h in topology.withLock({ Array($0.sources.values) }) + stoppingSources { counters[ObjectIdentifier(h.stats)] = h.stats }
        outcome.positionsDuringReload = counters.values.reduce(0) { $0 + $1.emitted } - emittedBefore
        logger.info("reloaded: \(outcome.summary) (\(outcome.milliseconds) ms, \(outcome.positionsDuringReload) position(s) emitted meanwhile)")
        return outcome
    }

    /// A component's context for a rebuild: it keeps its counters when its type stayed the same.
    private func context(_ c: PipelineConfiguration.Component, reusing stats: ComponentStats?, sameType: Bool) -> ComponentContext {
        Pipeline.context(c, handler: logHandler, clock: clock, stats: sameType ? stats : nil)
    }
}

/// What a live reload did.
public struct ReloadOutcome: Sendable, CustomStringConvertible {
    public enum Status: Sendable, Equatable {
        /// The new configuration runs (possibly with nothing to change).
        case applied
        /// A new component could not be built; the running pipeline was kept as it was (or, for a
        /// sink that could only be built after its old instance stopped, as `problem` says).
        case failed
        /// The pipeline is stopping or has stopped.
        case rejected
    }

    public var status: Status
    /// JSON paths of components restarted with a new configuration, added, removed.
    public var restarted: [String] = []
    public var added: [String] = []
    public var removed: [String] = []
    /// Components left running as they were.
    public var unchanged = 0
    /// Settings that changed but apply only at the next start.
    public var needsRestart: [String] = []
    public var problem: String?
    /// From the supervisor taking the reload to the replacement sinks reading.
    public var duration: Duration = .zero
    /// Positions the sources emitted while the reload was applied.
    public var positionsDuringReload = 0

    public init(status: Status, problem: String? = nil, duration: Duration = .zero) {
        self.status = status
        self.problem = problem
        self.duration = duration
    }

    var milliseconds: Int64 { duration.milliseconds }

    /// `restarted sinks.file, added transforms.x, unchanged 3`.
    public var summary: String {
        var parts: [String] = []
        if !restarted.isEmpty { parts.append("restarted \(restarted.joined(separator: ", "))") }
        if !added.isEmpty { parts.append("added \(added.joined(separator: ", "))") }
        if !removed.isEmpty { parts.append("removed \(removed.joined(separator: ", "))") }
        if parts.isEmpty { parts.append("nothing changed") }
        parts.append("unchanged \(unchanged)")
        return parts.joined(separator: ", ")
    }

    public var description: String {
        switch status {
        case .applied: "reloaded: \(summary)"
        case .failed: "reload failed: \(problem ?? "")"
        case .rejected: "reload rejected: \(problem ?? "")"
        }
    }
}

/// A component that could not be built or started.
public struct PipelineError: Error, Sendable, CustomStringConvertible {
    public var component: String
    public var message: String
    public var description: String { "\(component): \(message)" }
}
