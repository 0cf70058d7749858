import GatewayCore
import Synchronization

// The tasks the supervisor starts (one per source and per sink, the tick loop, the stats line)
// and the steps of stopping them.
extension Pipeline {
    /// Every source has ended: transforms release what they hold, sink buffers close, and the
    /// sinks get `shutdown_timeout` to drain.
    func stopSinks(in group: inout DiscardingTaskGroup) {
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
            do { try await self.clock.sleep(for: timeout) } catch { return }
            let late = sinks.filter { !$0.ended.isFired }
            guard !late.isEmpty else { return }
            logger.warning("shutdown deadline of \(DurationText.format(timeout)) passed; cancelling \(late.count) sink(s)")
            for h in late { h.cancel.fire(reason: "deadline") }
        }
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

    func start(_ h: SourceHandle, in group: inout DiscardingTaskGroup) {
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

    func start(_ h: SinkHandle, sink: any PositionSink, in group: inout DiscardingTaskGroup) {
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

    /// Another gateway owns devices this source feeds (issue 30: "the loser logs and stops that
    /// partition"): the source stops, so its broker hands its unacknowledged messages to whoever
    /// else reads the partition; the other sources go on. The batch that conflicted was
    /// delivered to the sinks and is acknowledged like any batch whose state could not be saved.
    func stopAfterStateConflict(_ h: SourceHandle, _ conflict: DeviceStateStoreError) {
        guard !h.stop.isFired else { return }
        h.stats.count("state.conflict_stops")
        h.logger.error("stopping this source: another gateway wrote the state of devices it feeds (\(conflict.devices.prefix(5).joined(separator: ", "))); a partition must be read by one gateway only. The other sources go on; start it again (reload or restart) once the partition is settled")
        h.stop.fire(reason: "state conflict")
    }

    /// (Re)starts the tick loop for the transforms of the current table that tick.
    func restartTicks(in group: inout DiscardingTaskGroup) {
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

    func restartStats(in group: inout DiscardingTaskGroup) {
        let stop = ShutdownTrigger()
        auxiliary.withLock { a in a.stats.fire(reason: "restart"); a.stats = stop }
        guard let interval = settings.withLock({ $0.statsInterval }) else { return }
        group.addTask {
            await Pipeline.run(until: stop) {
                while !Task.isCancelled {
                    do { try await self.clock.sleep(for: interval) } catch { return }
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
            group.addTask { (try? await self.clock.sleep(for: limit)) != nil ? false : true }
            let first = await group.next() ?? true
            group.cancelAll()
            return first
        }
    }

    /// How often `--log-level debug` shows each source's progress.
    static let sourceProgressInterval: Duration = .seconds(5)

    /// At debug level: every few seconds, what each source has emitted so far and lately, so a
    /// pipeline that prints nothing shows which source is silent.
    func reportSourceProgress() async {
        var last: [String: Int] = [:]
        while !Task.isCancelled {
            do { try await clock.sleep(for: Pipeline.sourceProgressInterval) } catch { return }
            let sources = topology.withLock { t in t.configuration.sources.compactMap { t.sources[$0.id] } }
            for h in sources {
                let emitted = h.stats.emitted
                h.logger.debug("progress: \(emitted) position(s) emitted, \(emitted - (last[h.component.id] ?? 0)) in the last \(DurationText.format(Pipeline.sourceProgressInterval))")
                last[h.component.id] = emitted
            }
        }
    }

    func logStats() {
        guard logger.isEnabled(.info) else { return }
        for s in componentStats {
            var parts = ["in=\(s.received)", "out=\(s.emitted)"]
            if s.dropped > 0 { parts.append("dropped=\(s.dropped)") }
            for (name, value) in s.namedValues { parts.append("\(name)=\(value)") }
            logger.child("stats").info("\(s.id) \(parts.joined(separator: " "))")
        }
    }
}
