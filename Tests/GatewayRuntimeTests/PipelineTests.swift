import GatewayCore
import GatewayRuntime
import GatewayTesting
import Testing

@Suite(.timeLimit(.minutes(3))) struct PipelineTests {
    func source(_ id: String, _ s: some PositionSource) -> PipelineConfiguration.Component {
        .init(id: id, kind: .source, type: "test", prepared: PreparedComponent { _ in .source(s) })
    }
    func transform(_ id: String, _ inputs: [String], _ t: some PositionTransform) -> PipelineConfiguration.Component {
        .init(id: id, kind: .transform, type: "test", inputs: inputs, prepared: PreparedComponent { _ in .transform(t) })
    }
    func sink(_ id: String, _ inputs: [String], _ s: some PositionSink, buffer: PipelineConfiguration.BufferSettings = .init(), durable: Bool = false) -> PipelineConfiguration.Component {
        .init(id: id, kind: .sink, type: "test", inputs: inputs, buffer: buffer, prepared: PreparedComponent(durable: durable) { _ in .sink(s) })
    }
    var quiet: PipelineConfiguration.Settings { .init(shutdownTimeout: .seconds(5), statsInterval: nil) }

    @Test func everyPositionReachesEverySinkInOrderAndTheRunExitsZero() async throws {
        let a = Recorder(), b = Recorder()
        let config = PipelineConfiguration(
            sources: [source("rx", ListSource(positions: track(1000), batchSize: 7))],
            transforms: [transform("half", ["rx"], EveryOther())],
            sinks: [sink("all", ["rx"], RecordingSink(recorder: a), buffer: .init(maxPositions: 16)),
                    sink("half", ["half"], RecordingSink(recorder: b, delayPerBatch: .milliseconds(1)), durable: true)],
            settings: quiet)
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        #expect(await p.run() == 0)
        #expect(a.all.map(\.id) == track(1000).map(\.id))
        // Odd positions as they come, plus the one held until finish.
        #expect(b.all.count == 501)
        #expect(b.all.last?.id == "src-999")
    }

    @Test func dropOldestKeepsTheNewestAndCountsTheRest() async throws {
        let r = Recorder()
        let config = PipelineConfiguration(
            sources: [source("rx", ListSource(positions: track(500), batchSize: 50))],
            sinks: [sink("slow", ["rx"], RecordingSink(recorder: r, delayPerBatch: .milliseconds(20)), buffer: .init(maxPositions: 60, whenFull: .dropOldest))],
            settings: quiet)
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        #expect(await p.run() == 0)
        let stats = try #require(p.componentStats.last)
        #expect(r.all.count + stats.dropped == 500)
        #expect(stats.dropped > 0)
        #expect(r.all.last?.id == "src-499")
        #expect(r.all.map(\.id) == r.all.sorted { $0.time! < $1.time! }.map(\.id))
    }

    @Test func blockPolicyLosesNothingBehindASlowSink() async throws {
        let r = Recorder()
        let config = PipelineConfiguration(
            sources: [source("rx", ListSource(positions: track(300), batchSize: 25))],
            sinks: [sink("slow", ["rx"], RecordingSink(recorder: r, delayPerBatch: .milliseconds(2)), buffer: .init(maxPositions: 30))],
            settings: quiet)
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        #expect(await p.run() == 0)
        #expect(r.all.count == 300)
    }

    @Test func shutdownStopsSourcesAndFlushesSinks() async throws {
        let r = Recorder()
        let config = PipelineConfiguration(
            sources: [source("rx", ListSource(positions: track(20), waitForCancellation: true))],
            sinks: [sink("out", ["rx"], RecordingSink(recorder: r))],
            settings: quiet)
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        async let code = p.run()
        #expect(await Poll.until { r.all.count >= 20 })
        p.shutdown(reason: "test")
        #expect(await code == 0)
        #expect(r.all.count == 20)
    }

    @Test func aFailingSinkStopsThePipelineWithExitOne() async throws {
        let r = Recorder()
        let config = PipelineConfiguration(
            sources: [source("rx", ListSource(positions: track(100), batchSize: 5, waitForCancellation: true))],
            sinks: [sink("bad", ["rx"], RecordingSink(recorder: r, failAfter: 10), buffer: .init(maxPositions: 5))],
            settings: quiet)
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        #expect(await p.run() == 1)
    }

    @Test func aSourceThatCannotStartFailsWithExitOne() async throws {
        struct Broken: PositionSource {
            func run(output: SourceOutput) async throws { throw TestFailure() }
        }
        let r = Recorder()
        let config = PipelineConfiguration(sources: [source("rx", Broken())], sinks: [sink("o", ["rx"], RecordingSink(recorder: r))], settings: quiet)
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        #expect(await p.run() == 1)
    }

    @Test func theShutdownDeadlineCancelsAStuckSink() async throws {
        struct Stuck: PositionSink {
            func run(input: any SinkInput) async throws {
                _ = await input.next()
                try await Task.sleep(for: .seconds(3600))
            }
        }
        var settings = quiet
        settings.shutdownTimeout = .milliseconds(200)
        let config = PipelineConfiguration(sources: [source("rx", ListSource(positions: track(3)))], sinks: [sink("o", ["rx"], Stuck())], settings: settings)
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        #expect(await p.run() == 0)
    }
}
