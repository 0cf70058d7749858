@testable import GatewayRuntime
import Testing

/// The supervisor's phases, event by event: no pipeline, no task.
@Suite struct PipelineSupervisorTests {
    typealias Event = PipelineSupervisor.Event
    typealias Action = PipelineSupervisor.Action

    /// Feeds `events` to a fresh supervisor; the actions, and the phase it ends in.
    func run(_ events: [Event]) -> (actions: [Action], phase: PipelineSupervisor.Phase) {
        var supervisor = PipelineSupervisor()
        let actions = events.map { supervisor.event($0) }
        return (actions, supervisor.phase)
    }

    @Test func aPipelineWithoutSourcesStopsItsSinksAtOnce() {
        let r = run([.started(sources: 0)])
        #expect(r.actions == [.stopSinks])
        #expect(r.phase == .stoppingSinks)
    }

    @Test func theLastSourceEndingOnItsOwnStopsTheSinks() {
        let r = run([.started(sources: 2), .sourceEnded(last: false), .sourceEnded(last: true)])
        #expect(r.actions == [.none, .none, .stopSinks])
        #expect(r.phase == .stoppingSinks)
    }

    @Test func aShutdownStopsTheSourcesFirstAndTheSinksOnceTheLastOneEnded() {
        let r = run([.started(sources: 2), .shutdownRequested(sourcesRunning: true), .sourceEnded(last: false), .sourceEnded(last: true)])
        #expect(r.actions == [.none, .shutDown(then: .stopSources), .none, .stopSinks])
        #expect(r.phase == .stoppingSinks)
    }

    @Test func aShutdownWithNoSourceRunningStopsTheSinksAtOnce() {
        let r = run([.started(sources: 1), .shutdownRequested(sourcesRunning: false)])
        #expect(r.actions == [.none, .shutDown(then: .stopSinks)])
        #expect(r.phase == .stoppingSinks)
    }

    @Test func aSecondShutdownOnlyRepeatsTheSinksStopRequest() {
        // While sources stop, and while sinks drain (a signal during `run --drain`).
        let r = run([.started(sources: 1), .shutdownRequested(sourcesRunning: true), .shutdownRequested(sourcesRunning: true),
                     .sourceEnded(last: true), .shutdownRequested(sourcesRunning: false)])
        #expect(r.actions == [.none, .shutDown(then: .stopSources), .shutDown(then: .nothingMore), .stopSinks, .shutDown(then: .nothingMore)])
    }

    @Test func sinksStopOnceEvenWhenASourceEndsAfterwards() {
        // A source a reload replaced can end after the others.
        let r = run([.started(sources: 1), .sourceEnded(last: true), .sourceEnded(last: true)])
        #expect(r.actions == [.none, .stopSinks, .none])
    }

    @Test func reloadsApplyOnlyWhileRunning() {
        var supervisor = PipelineSupervisor()
        _ = supervisor.event(.started(sources: 1))
        #expect(supervisor.event(.reloadRequested) == .applyReload)
        _ = supervisor.event(.shutdownRequested(sourcesRunning: true))
        #expect(supervisor.event(.reloadRequested) == .rejectReload(problem: "the pipeline is stopping"))
        _ = supervisor.event(.sourceEnded(last: true))
        #expect(supervisor.event(.reloadRequested) == .rejectReload(problem: "the pipeline is stopping"))
        _ = supervisor.event(.stopped)
        #expect(supervisor.event(.reloadRequested) == .rejectReload(problem: "the pipeline has stopped"))
    }

    @Test func theLoopEndsOnlyOnceSinksStopAndEveryOneEnded() {
        var supervisor = PipelineSupervisor()
        _ = supervisor.event(.started(sources: 1))
        // Sinks that ended early (a failure) do not end a pipeline whose sources still run.
        #expect(!supervisor.isDone(everySinkEnded: true))
        _ = supervisor.event(.sourceEnded(last: true))
        #expect(!supervisor.isDone(everySinkEnded: false))
        #expect(supervisor.isDone(everySinkEnded: true))
    }
}
