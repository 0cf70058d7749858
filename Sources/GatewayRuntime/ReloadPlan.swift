import GatewayCore

/// What a live reload changes, decided from the running configuration and the new one alone.
///
/// Pure (no tasks, no I/O, nothing built), so the decisions are tested on their own
/// (ReloadPlanTests) and the code that applies a plan (PipelineReload.swift) only performs them,
/// in the order the pipeline's documentation gives.
///
/// Components compare by JSON path (`sinks.upload`): an id that moved between sections is removed
/// from one and added to the other. A component is restarted when ``PipelineConfiguration/Component/differs(from:)``
/// says so (type, inputs, buffer or options); every other one keeps running untouched.
struct ReloadPlan: Sendable {
    /// A setting that changed but applies only at the next start, with the warning that says so.
    struct RestartNeeded: Sendable, Equatable {
        var path: String
        var warning: String
    }

    /// `settings.stats_interval` or `settings.shutdown_timeout` changed: both apply at once.
    var appliesSettings = false
    /// `settings.stats_interval` changed: the stats line restarts with the new interval.
    var restartsStats = false
    /// Settings that keep their running value, in a fixed order (log level, state, threads).
    var needsRestart: [RestartNeeded] = []

    /// Components whose configuration changed, in the new configuration's order.
    var restarted: [String] = []
    /// Components only the new configuration has, in its order.
    var added: [String] = []
    /// Components only the running configuration has, in its order.
    var removed: [String] = []
    /// Components of the new configuration that keep running as they are.
    var unchanged = 0
    /// Restarted components whose type stayed the same: the new instance keeps the old one's
    /// counters, so `/metrics` shows one series across the reload.
    var keepsCounters: Set<String> = []
    /// Restarted or added sinks that claim something a restarted or removed sink holds (its
    /// queue, its file): built only once that sink closed it (step 7), not with the others.
    var buildsAfterOldSinksStop: Set<String> = []
    /// Every running component by path, for a sink that must fall back to its previous
    /// configuration.
    let running: [String: PipelineConfiguration.Component]

    /// - Parameters:
    ///   - running: what runs now: the components of the last reload (or the start) and the
    ///     settings in effect. A setting that needs a restart keeps its value from the start, so
    ///     a reload that still asks for another value warns again.
    ///   - new: the validated configuration to run.
    init(running: PipelineConfiguration, new: PipelineConfiguration) {
        let was = running.settings, now = new.settings
        if was.statsInterval != now.statsInterval || was.shutdownTimeout != now.shutdownTimeout {
            appliesSettings = true
            restartsStats = was.statsInterval != now.statsInterval
        }
        if was.logLevel != now.logLevel {
            needsRestart.append(RestartNeeded(path: "settings.log_level",
                                              warning: "settings.log_level changed: that needs a restart; kept \(was.logLevel?.name ?? "the level it started with")"))
        }
        if was.state != now.state {
            needsRestart.append(RestartNeeded(path: "settings.state",
                                              warning: "settings.state changed: that needs a restart; the state store stays where it is"))
        }
        if was.threads != now.threads {
            needsRestart.append(RestartNeeded(path: "settings.threads",
                                              warning: "settings.threads changed: that needs a restart; kept \(was.threads)"))
        }

        let byPath = Dictionary(running.components.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        self.running = byPath
        let newPaths = Set(new.components.map(\.path))
        for c in new.components {
            guard let previous = byPath[c.path] else { added.append(c.path); continue }
            guard previous.differs(from: c) else { continue }
            restarted.append(c.path)
            if previous.type == c.type { keepsCounters.insert(c.path) }
        }
        removed = running.components.map(\.path).filter { !newPaths.contains($0) }
        unchanged = new.components.count - restarted.count - added.count

        let replaced = Set(restarted).union(removed)
        let held = Set(running.sinks.filter { replaced.contains($0.path) }.flatMap(\.prepared.claims))
        for c in new.sinks where builds(c.path) && !held.isDisjoint(with: c.prepared.claims) {
            buildsAfterOldSinksStop.insert(c.path)
        }
    }

    /// Whether no component starts, stops or restarts (settings may still change).
    var keepsEveryComponent: Bool { restarted.isEmpty && added.isEmpty && removed.isEmpty }

    /// Whether the component at `path` is built anew: restarted or added.
    func builds(_ path: String) -> Bool { restarted.contains(path) || added.contains(path) }

    /// Whether the running instance at `path` stops: restarted or removed.
    func replaces(_ path: String) -> Bool { restarted.contains(path) || removed.contains(path) }
}
