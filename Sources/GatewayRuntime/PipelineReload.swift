import GatewayCore

// Live reload: the public entry, and the supervisor applying a ``ReloadPlan`` step by step.
extension Pipeline {
    /// Applies a new, already validated configuration to the running pipeline and returns what it
    /// did; see the type's documentation for the order. Components whose configuration did not
    /// change keep running untouched. When a new component cannot be built, nothing changes.
    ///
    /// The caller (the gateway service on SIGHUP) validates the file first, the same way
    /// `locgate validate` does, and is where service-manager notifications go (`RELOADING=1`
    /// before, `READY=1` after). Reloads are applied one at a time; a reload after shutdown
    /// began is rejected.
    public func reload(configuration: PipelineConfiguration) async -> ReloadOutcome {
        await withCheckedContinuation { reply in
            if case .terminated = mailbox.yield(.reload(configuration, reply)) {
                reply.resume(returning: ReloadOutcome(status: .rejected, problem: "the pipeline has stopped"))
            }
        }
    }

    /// Runs on the supervisor: see ``reload(configuration:)``.
    func apply(_ new: PipelineConfiguration, in group: inout DiscardingTaskGroup) async -> ReloadOutcome {
        let started = clock.monotonicNow()
        let old = topology.withLock { $0 }
        let emittedBefore = old.sources.values.reduce(0) { $0 + $1.stats.emitted }
        var running = old.configuration
        running.settings = settings.withLock { $0 }
        let plan = ReloadPlan(running: running, new: new)
        var outcome = ReloadOutcome(status: .applied)
        outcome.restarted = plan.restarted
        outcome.added = plan.added
        outcome.removed = plan.removed
        outcome.unchanged = plan.unchanged

        // Settings: what can change live does; the rest waits for a restart.
        if plan.appliesSettings {
            settings.withLock { s in
                s.statsInterval = new.settings.statsInterval
                s.shutdownTimeout = new.settings.shutdownTimeout
            }
            if plan.restartsStats { restartStats(in: &group) }
        }
        for setting in plan.needsRestart {
            outcome.needsRestart.append(setting.path)
            logger.warning(setting.warning)
        }
        if plan.keepsEveryComponent {
            outcome.duration = clock.monotonicNow() - started
            logger.info("reloaded: \(outcome.summary)\(plan.appliesSettings ? " (settings applied)" : "")")
            return outcome
        }

        // 1. Build what is new (a failure here changes nothing).
        let fresh: Replacements
        do {
            fresh = try buildReplacements(new, plan: plan, old: old)
        } catch {
            logger.error("reload failed, kept the running pipeline: \(error)")
            return ReloadOutcome(status: .failed, problem: "\(error)", duration: clock.monotonicNow() - started)
        }

        // 2. Stop replaced sources; what they emit until then goes along the old routes.
        let stoppingSources = old.configuration.sources.filter { plan.replaces($0.path) }.compactMap { old.sources[$0.id] }
        topology.withLock { t in for h in stoppingSources { t.sources[h.component.id] = nil } }
        for h in stoppingSources { h.stop.fire(reason: "reload") }
        for h in stoppingSources { await h.ended.wait() }

        // 3. Swap the routing table and start new sources.
        let oldTable = swapRoutes(to: new, fresh: fresh, old: old, in: &group)

        // 4. Batches that took the old table before the swap finish along it.
        await oldTable.retire()

        // 5. Replaced transforms release what they hold into their old routes (old sinks still read).
        for (node, routes) in oldTable.transforms where plan.replaces("transforms.\(node.id)") && old.transforms[node.id] === node {
            let out = node.finish()
            if !out.isEmpty { Pipeline.routeSynchronously(out, to: routes) }
        }

        // 6. Old sinks drain and acknowledge what they hold, within shutdown_timeout.
        await drainReplacedSinks(old.configuration.sinks.filter { plan.replaces($0.path) }.compactMap { old.sinks[$0.id] })

        // 7. Replacement and added sinks start reading.
        for c in new.sinks {
            guard let (h, prebuilt) = fresh.sinks[c.id] else { continue }
            if let sink = prebuilt {
                start(h, sink: sink, in: &group)
            } else if let problem = startDeferred(h, c, plan: plan, in: &group) {
                outcome.status = .failed
                outcome.problem = problem
            }
        }
        outcome.duration = clock.monotonicNow() - started
        // A restarted source of the same type shares its predecessor's counters: count each once.
        var counters: [ObjectIdentifier: ComponentStats] = [:]
        for h in topology.withLock({ Array($0.sources.values) }) + stoppingSources { counters[ObjectIdentifier(h.stats)] = h.stats }
        outcome.positionsDuringReload = counters.values.reduce(0) { $0 + $1.emitted } - emittedBefore
        logger.info("reloaded: \(outcome.summary) (\(outcome.milliseconds) ms, \(outcome.positionsDuringReload) position(s) emitted meanwhile)")
        return outcome
    }

    /// The components a reload builds, by id; a sink's instance is nil until step 7 when it
    /// waits for what a replaced sink holds.
    struct Replacements {
        var sources: [String: SourceHandle] = [:]
        var transforms: [String: TransformNode] = [:]
        var sinks: [String: (SinkHandle, (any PositionSink)?)] = [:]
    }

    /// Step 1: builds every restarted and added component, keeping counters where the plan says.
    private func buildReplacements(_ new: PipelineConfiguration, plan: ReloadPlan, old: Topology) throws -> Replacements {
        var fresh = Replacements()
        for c in new.transforms where plan.builds(c.path) {
            let ctx = builder.context(c, reusing: plan.keepsCounters.contains(c.path) ? old.transforms[c.id]?.stats : nil)
            // Starts from what the store holds: the state the replaced instance saved so far.
            fresh.transforms[c.id] = builder.node(c, ctx, transform: try builder.transform(c, ctx), store: stateStore)
        }
        for c in new.sources where plan.builds(c.path) {
            let ctx = builder.context(c, reusing: plan.keepsCounters.contains(c.path) ? old.sources[c.id]?.stats : nil, store: stateStore, commands: deviceCommands)
            fresh.sources[c.id] = try builder.source(c, ctx)
        }
        for c in new.sinks where plan.builds(c.path) {
            let ctx = builder.context(c, reusing: plan.keepsCounters.contains(c.path) ? old.sinks[c.id]?.stats : nil, commands: deviceCommands)
            // A sink that claims something a replaced sink holds (its queue, its file) is built
            // once that one closed it.
            let deferred = plan.buildsAfterOldSinksStop.contains(c.path)
            fresh.sinks[c.id] = (SinkHandle(component: c, context: ctx), deferred ? nil : try builder.sink(c, ctx))
        }
        return fresh
    }

    /// Step 3: the new topology and routing table in place, new sources started; returns the
    /// table it replaced, to retire.
    private func swapRoutes(to new: PipelineConfiguration, fresh: Replacements, old: Topology,
                            in group: inout DiscardingTaskGroup) -> RoutingTable {
        var next = Topology(configuration: new)
        for c in new.sources { next.sources[c.id] = fresh.sources[c.id] ?? old.sources[c.id] }
        for c in new.transforms { next.transforms[c.id] = fresh.transforms[c.id] ?? old.transforms[c.id] }
        for c in new.sinks { next.sinks[c.id] = fresh.sinks[c.id]?.0 ?? old.sinks[c.id] }
        // An unchanged source or sink that ended on its own (input ended, failed) is not brought back.
        let table = Pipeline.makeTable(next)
        topology.withLock { $0 = next }
        let oldTable = routing.swap(table)
        for c in new.sources {
            guard let h = fresh.sources[c.id] else { continue }
            if table.sources[c.id]?.isEmpty ?? true { h.logger.warning("feeds nothing: no transform or sink lists it in inputs") }
            start(h, in: &group)
        }
        restartTicks(in: &group)
        return oldTable
    }

    /// Step 6: closes the replaced sinks' buffers and waits until they have delivered or
    /// committed what they hold; cancels them after `shutdown_timeout`.
    private func drainReplacedSinks(_ stoppingSinks: [SinkHandle]) async {
        for h in stoppingSinks { h.buffer.close() }
        guard !stoppingSinks.isEmpty else { return }
        let timeout = settings.withLock { $0.shutdownTimeout }
        await withTaskGroup(of: Void.self) { drain in
            drain.addTask { for h in stoppingSinks { await h.ended.wait() } }
            drain.addTask { [logger, clock] in
                do { try await clock.sleep(for: timeout) } catch { return }
                logger.warning("reload: replaced sinks did not drain within \(DurationText.format(timeout)); cancelling them")
                for h in stoppingSinks { h.cancel.fire(reason: "deadline") }
            }
            await drain.next()
            drain.cancelAll()
        }
        for h in stoppingSinks { await h.ended.wait() }
    }

    /// Step 7 for a sink built only now that the sink it replaces closed what it claims; the
    /// problem when it could run neither with its new configuration nor its previous one.
    private func startDeferred(_ h: SinkHandle, _ c: PipelineConfiguration.Component, plan: ReloadPlan,
                               in group: inout DiscardingTaskGroup) -> String? {
        do {
            start(h, sink: try builder.sink(c, builder.context(c, reusing: h.stats, commands: deviceCommands)), in: &group)
            return nil
        } catch {
            // The old instance is gone: run the previous configuration again rather than lose
            // what the new buffer holds; a sink with no previous configuration cannot.
            if let previous = plan.running[c.path], previous.kind == .sink,
               let sink = try? builder.sink(previous, builder.context(previous, reusing: h.stats, commands: deviceCommands)) {
                logger.error("reload: \(error); \(c.path) runs with its previous configuration")
                start(h, sink: sink, in: &group)
                topology.withLock { t in
                    if let i = t.configuration.sinks.firstIndex(where: { $0.id == c.id }) { t.configuration.sinks[i] = previous }
                }
                return nil
            }
            logger.error("reload: \(error); positions routed to \(c.path) since the reload are dropped")
            h.buffer.close()
            h.ended.fire(reason: "failed")
            return "\(error)"
        }
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
