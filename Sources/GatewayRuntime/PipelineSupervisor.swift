/// The supervisor's phases: when a running pipeline starts stopping, what stops next, and
/// whether a reload may still be applied.
///
/// A value type with no tasks, locks or I/O, so every transition is tested on its own
/// (PipelineSupervisorTests). The supervisor loop (``Pipeline/run(monitor:)``) reads what it
/// needs from the topology, feeds it in as an event and performs the returned action outside
/// any lock: it alone starts and stops components.
///
/// ```
///  running ──shutdown, sources running──▶ stoppingSources ──last source ended──▶ stoppingSinks ──every sink ended──▶ stopped
///     │                                                                              ▲
///     └──no source / shutdown with none running / last source ended on its own ──────┘
/// ```
///
/// A reload is applied only while running: once stopping began, the components it would touch
/// may already be gone.
struct PipelineSupervisor: Sendable {
    enum Phase: Sendable, Equatable {
        /// Sources run; reloads are applied.
        case running
        /// A shutdown asked the sources to stop; waiting for the last one to end.
        case stoppingSources
        /// Every source has ended: transforms finished, sink buffers closed, sinks draining.
        case stoppingSinks
        /// Every sink has ended; the supervisor loop is over.
        case stopped
    }

    enum Event: Sendable, Equatable {
        /// The supervisor started every component; `sources` of them are sources.
        case started(sources: Int)
        /// SIGINT/SIGTERM or a failed component; `sourcesRunning`: some source has not ended yet.
        case shutdownRequested(sourcesRunning: Bool)
        /// A source's task ended; `last`: it belongs to the current topology and no other source
        /// there is still running (a source a reload replaced ends nothing).
        case sourceEnded(last: Bool)
        /// A reload asks to be applied.
        case reloadRequested
        /// The supervisor loop is over.
        case stopped
    }

    /// What a shutdown does after every sink got its stop request.
    enum ShutdownStep: Sendable, Equatable {
        /// Stopping was already under way.
        case nothingMore
        /// Stop the sources still running; the sinks follow when the last one ended.
        case stopSources
        /// No source runs: stop the sinks at once.
        case stopSinks
    }

    enum Action: Sendable, Equatable {
        case none
        /// Transforms release what they hold, sink buffers close, sinks get `shutdown_timeout`
        /// (or the drain's limit) to deliver.
        case stopSinks
        /// Every sink gets the stop request (``SinkInput/stopRequest``: a sink with a durable
        /// queue stops once what it received is committed), then `then`. Whatever the phase: a
        /// signal while the sinks drain (`run --drain`) still stops those sinks at once.
        case shutDown(then: ShutdownStep)
        /// Apply the reload now.
        case applyReload
        /// Answer the reload with `rejected` and this problem.
        case rejectReload(problem: String)
    }

    private(set) var phase = Phase.running

    mutating func event(_ event: Event) -> Action {
        switch (phase, event) {
        case (.running, .started(let sources)):
            guard sources == 0 else { return .none }
            phase = .stoppingSinks
            return .stopSinks
        case (_, .started):
            return .none

        case (.running, .shutdownRequested(let sourcesRunning)):
            phase = sourcesRunning ? .stoppingSources : .stoppingSinks
            return .shutDown(then: sourcesRunning ? .stopSources : .stopSinks)
        case (.stoppingSources, .shutdownRequested), (.stoppingSinks, .shutdownRequested):
            return .shutDown(then: .nothingMore)
        case (.stopped, .shutdownRequested):
            return .none

        case (.running, .sourceEnded(last: true)), (.stoppingSources, .sourceEnded(last: true)):
            phase = .stoppingSinks
            return .stopSinks
        case (_, .sourceEnded):
            return .none

        case (.running, .reloadRequested):
            return .applyReload
        case (.stoppingSources, .reloadRequested), (.stoppingSinks, .reloadRequested):
            return .rejectReload(problem: "the pipeline is stopping")
        case (.stopped, .reloadRequested):
            return .rejectReload(problem: "the pipeline has stopped")

        case (_, .stopped):
            phase = .stopped
            return .none
        }
    }

    /// Whether the supervisor loop is over: the sinks are stopping and every one has ended
    /// (checked before each wait for the next event, so a sink that ended before stopping
    /// began needs no event of its own).
    func isDone(everySinkEnded: @autoclosure () -> Bool) -> Bool {
        phase == .stoppingSinks && everySinkEnded()
    }
}
