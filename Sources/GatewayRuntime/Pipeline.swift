import GatewayCore
import Synchronization

/// A running pipeline built from a validated configuration.
///
/// ```
///  source task ──emit(batch)──▶ transform ─▶ transform ──▶ [SinkBuffer] ──▶ sink task
///       │                          (inline, under the        bounded,
///       └────────────────────────▶  transform's lock)        block | drop_oldest
/// ```
///
/// Rules:
/// - End-to-end acknowledgements: a batch emitted with `whenHandled` is acknowledged once every
///   sink buffer that received it (or positions transforms derived from it) was acknowledged by
///   its sink, which does so only after taking responsibility (committed to its outbox, written
///   and flushed). Positions a transform holds and releases later (at a tick or at the end) are
///   not tied to the acknowledgement of the batch they came in.
/// - One task per source and per sink, all children of one task group; no unstructured tasks.
/// - Transforms run inline on the emitting source's task, one call at a time per transform, so a
///   position crosses exactly one async hop (the sink buffer) between source and sink.
/// - Positions move in batches. Every buffer is bounded; its overflow policy is named.
/// - Shutdown is ordered: sources stop (input ended, a signal, or a failed component), transforms
///   release held positions (`finish`), sink buffers close, sinks drain and flush within
///   `shutdown_timeout`, after which they are cancelled.
public final class Pipeline: Sendable {
    /// Where a batch goes next.
    enum Route: Sendable {
        case transform(TransformNode)
        case sink(SinkBuffer)
    }

    final class TransformNode: Sendable {
        let id: String
        let stats: ComponentStats
        let routes: [Route]
        let tickInterval: Duration?
        /// Calls in progress, for the heartbeat's wedge detection (PipelineHeartbeat.swift).
        let activity = ActivityProbe()
        private let transform: Mutex<any PositionTransform>

        init(id: String, transform: sending any PositionTransform, stats: ComponentStats, routes: [Route]) {
            self.id = id
            self.stats = stats
            self.routes = routes
            self.tickInterval = transform.tickInterval
            self.transform = Mutex(transform)
        }

        func process(_ batch: [Position]) -> [Position] {
            stats.addReceived(batch.count)
            var out: [Position] = []
            out.reserveCapacity(batch.count)
            activity.enter(); defer { activity.exit() }
            transform.withLock { t in
                for p in batch { t.process(p, into: &out) }
            }
            stats.addEmitted(out.count)
            return out
        }

        func tick(now: Timestamp) -> [Position] {
            var out: [Position] = []
            activity.enter(); defer { activity.exit() }
            transform.withLock { t in t.tick(now: now, into: &out) }
            stats.addEmitted(out.count)
            return out
        }

        func finish() -> [Position] {
            var out: [Position] = []
            activity.enter(); defer { activity.exit() }
            transform.withLock { t in t.finish(into: &out) }
            stats.addEmitted(out.count)
            return out
        }
    }

    struct SourceNode: Sendable {
        let id: String
        let source: any PositionSource
        let stats: ComponentStats
        let logger: Logger
        let routes: [Route]
    }

    struct SinkNode: Sendable {
        let id: String
        let sink: any PositionSink
        let buffer: SinkBuffer
        let stats: ComponentStats
        let logger: Logger
    }

    let sources: [SourceNode]
    /// Transforms in topological order (inputs before outputs).
    let transforms: [TransformNode]
    let sinks: [SinkNode]
    private let settings: PipelineConfiguration.Settings
    let logger: Logger
    private let clock: any GatewayClock
    private let trigger = ShutdownTrigger()
    private let failed = Atomic<Bool>(false)

    /// Statistics of every component, sources first.
    public let componentStats: [ComponentStats]

    /// Builds every component; throws the first component that cannot be built (exit 1).
    public init(configuration: PipelineConfiguration, logHandler: any LogHandler, clock: any GatewayClock = SystemClock()) throws {
        self.settings = configuration.settings
        self.clock = clock
        self.logger = Logger(label: "pipeline", handler: logHandler)
        func context(_ c: PipelineConfiguration.Component) -> ComponentContext {
            ComponentContext(id: c.id, kind: c.kind, logger: Logger(label: c.path, handler: logHandler), stats: ComponentStats(id: c.path), clock: clock)
        }
        func build(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> BuiltComponent {
            do { return try c.prepared.build(ctx) } catch {
                throw PipelineError(component: c.path, message: "cannot start: \(error)")
            }
        }

        var sinkNodes: [SinkNode] = []
        for c in configuration.sinks {
            let ctx = context(c)
            guard case .sink(let s) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
            let buffer = SinkBuffer(capacity: c.buffer.maxPositions, policy: c.buffer.whenFull, durable: c.prepared.durable, stats: ctx.stats)
            sinkNodes.append(SinkNode(id: c.id, sink: s, buffer: buffer, stats: ctx.stats, logger: ctx.logger))
        }

        // Build transforms from the outputs back, so each node knows its routes when created.
        let order = Pipeline.topologicalOrder(configuration.transforms)
        var nodes: [String: TransformNode] = [:]
        func routes(from id: String) -> [Route] {
            var r: [Route] = []
            for t in order where t.inputs.contains(id) { if let n = nodes[t.id] { r.append(.transform(n)) } }
            for (i, s) in configuration.sinks.enumerated() where s.inputs.contains(id) { r.append(.sink(sinkNodes[i].buffer)) }
            return r
        }
        for c in order.reversed() {
            let ctx = context(c)
            guard case .transform(let t) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
            nodes[c.id] = TransformNode(id: c.id, transform: t, stats: ctx.stats, routes: routes(from: c.id))
        }
        var sourceNodes: [SourceNode] = []
        for c in configuration.sources {
            let ctx = context(c)
            guard case .source(let s) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
            let r = routes(from: c.id)
            if r.isEmpty { ctx.logger.warning("feeds nothing: no transform or sink lists it in inputs") }
            sourceNodes.append(SourceNode(id: c.id, source: s, stats: ctx.stats, logger: ctx.logger, routes: r))
        }
        self.sources = sourceNodes
        self.transforms = order.compactMap { nodes[$0.id] }
        self.sinks = sinkNodes
        self.componentStats = sourceNodes.map(\.stats) + order.compactMap { nodes[$0.id]?.stats } + sinkNodes.map(\.stats)
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

    /// Asks the pipeline to stop gracefully (what SIGINT/SIGTERM do).
    public func shutdown(reason: String) {
        trigger.fire(reason: reason)
    }

    /// Runs until every source has ended or shutdown was requested; returns the exit status
    /// (0, or 1 when a component failed). A `monitor` hears that every component started, and
    /// the heartbeat while the pipeline runs (see ``PipelineMonitor``).
    public func run(monitor: (any PipelineMonitor)? = nil) async -> Int32 {
        logger.info("starting: \(sources.count) source(s), \(transforms.count) transform(s), \(sinks.count) sink(s)")
        let sinksClosed = ShutdownTrigger()
        enum Part: Sendable { case sinks, sources, stats }
        await withTaskGroup(of: Part.self) { group in
            group.addTask { await self.runSinks(closed: sinksClosed); return .sinks }
            group.addTask { await self.reportStatsPeriodically(); return .stats }
            if let monitor { group.addTask { await self.runHeartbeat(monitor); return .stats } }
            group.addTask {
                await self.runSources()
                self.finishTransforms()
                for s in self.sinks { s.buffer.close() }
                sinksClosed.fire(reason: "sources ended")
                return .sources
            }
            // Sinks and sources end on their own; the stats reporter is cancelled once both have.
            var remaining: Set<Part> = [.sinks, .sources]
            while let part = await group.next() {
                remaining.remove(part)
                if remaining.isEmpty { group.cancelAll() }
            }
        }
        logStats()
        let code: Int32 = failed.load(ordering: .relaxed) ? 1 : 0
        logger.info("stopped\(code == 0 ? "" : " after a failure")")
        return code
    }

    // MARK: - Sources

    private func runSources() async {
        enum Outcome: Sendable { case ended, shutdown }
        await withTaskGroup(of: Outcome.self) { group in
            for node in sources {
                group.addTask {
                    let output = SourceOutput(tracking: { batch, ack in
                        node.stats.addEmitted(batch.count)
                        await Pipeline.route(batch, to: node.routes, acknowledgement: ack)
                    })
                    do {
                        try await node.source.run(output: output)
                        node.logger.info("input ended")
                    } catch is CancellationError {
                        node.logger.debug("stopped")
                    } catch {
                        if Task.isCancelled { node.logger.debug("stopped: \(error)"); return .ended }
                        node.logger.error("failed: \(error)")
                        self.failed.store(true, ordering: .relaxed)
                        self.trigger.fire(reason: "\(node.id) failed")
                    }
                    return .ended
                }
            }
            group.addTask {
                await self.trigger.wait()
                return .shutdown
            }
            if transforms.contains(where: { $0.tickInterval != nil }) {
                group.addTask {
                    await self.runTicks()
                    return .ended
                }
            }
            var running = sources.count
            while let outcome = await group.next() {
                switch outcome {
                case .shutdown:
                    if let reason = trigger.reason, running > 0 { logger.info("shutting down: \(reason)") }
                    group.cancelAll()
                case .ended:
                    running -= 1
                    if running == 0 { group.cancelAll() }
                }
            }
        }
    }

    /// Sends a batch along each route: transforms inline, sinks through their buffers.
    ///
    /// An acknowledgement follows the batch and whatever transforms make of it (geofence events
    /// included): each sink buffer that receives positions retains it until its sink acknowledged
    /// them; what transforms drop needs nothing more.
    static func route(_ batch: [Position], to routes: [Route], acknowledgement: BatchAcknowledgement? = nil) async {
        for r in routes {
            switch r {
            case .sink(let buffer):
                await buffer.send(batch, acknowledgement: acknowledgement)
            case .transform(let node):
                let out = node.process(batch)
                if !out.isEmpty { await route(out, to: node.routes, acknowledgement: acknowledgement) }
            }
        }
    }

    private func runTicks() async {
        let ticking = transforms.filter { $0.tickInterval != nil }
        let step = ticking.compactMap(\.tickInterval).min() ?? .seconds(1)
        var last: [String: Timestamp] = [:]
        while !Task.isCancelled {
            do { try await clock.sleep(for: step) } catch { return }
            let now = clock.now()
            for node in ticking {
                guard let interval = node.tickInterval else { continue }
                if let l = last[node.id], now.milliseconds - l.milliseconds < interval.milliseconds { continue }
                last[node.id] = now
                let out = node.tick(now: now)
                if !out.isEmpty { await Pipeline.route(out, to: node.routes) }
            }
        }
    }

    private func finishTransforms() {
        // Held positions go only to sinks' buffers here: they are still open, and routes are
        // followed synchronously through later transforms.
        for node in transforms {
            let out = node.finish()
            if !out.isEmpty { Pipeline.routeSynchronously(out, to: node.routes) }
        }
    }

    /// Like `route`, for shutdown: sink buffers accept without waiting (the sinks are still draining).
    static func routeSynchronously(_ batch: [Position], to routes: [Route]) {
        for r in routes {
            switch r {
            case .sink(let buffer): buffer.enqueueWithoutWaiting(batch)
            case .transform(let node):
                let out = node.process(batch)
                if !out.isEmpty { routeSynchronously(out, to: node.routes) }
            }
        }
    }

    // MARK: - Sinks

    private func runSinks(closed: ShutdownTrigger) async {
        enum Outcome: Sendable { case sinkEnded, deadline }
        let timeout = settings.shutdownTimeout
        guard !sinks.isEmpty else { return }
        await withTaskGroup(of: Outcome.self) { group in
            for node in sinks {
                group.addTask {
                    do {
                        try await node.sink.run(input: node.buffer)
                        node.logger.debug("flushed and stopped")
                    } catch is CancellationError {
                        node.logger.warning("stopped at the shutdown deadline with \(node.buffer.depth) position(s) unflushed")
                    } catch {
                        node.logger.error("failed: \(error)")
                        self.failed.store(true, ordering: .relaxed)
                        self.trigger.fire(reason: "\(node.id) failed")
                    }
                    // A sink that stopped early must not leave its senders blocked.
                    node.buffer.close()
                    return .sinkEnded
                }
            }
            group.addTask {
                await closed.wait()
                guard !Task.isCancelled else { return .deadline }
                try? await Task.sleep(for: timeout)
                return .deadline
            }
            var running = sinks.count
            while let outcome = await group.next() {
                switch outcome {
                case .sinkEnded:
                    running -= 1
                    if running == 0 { group.cancelAll() }
                case .deadline:
                    if running > 0 {
                        logger.warning("shutdown deadline of \(DurationText.format(timeout)) passed; cancelling \(running) sink(s)")
                        group.cancelAll()
                    }
                }
            }
        }
    }

    // MARK: - Stats

    private func reportStatsPeriodically() async {
        guard let interval = settings.statsInterval else { return }
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            logStats()
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
}

/// A component that could not be built or started.
public struct PipelineError: Error, Sendable, CustomStringConvertible {
    public var component: String
    public var message: String
    public var description: String { "\(component): \(message)" }
}
