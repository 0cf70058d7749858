import Dispatch
import GatewayCore
import GatewayRuntime
import GatewayTesting
import Locking
import Synchronization
import Testing

func fix(_ n: Int) -> Position {
    Position(time: Timestamp(milliseconds: Int64(n) * 1000), latitude: 1, longitude: Double(n), mode: .threeD, source: "s", id: "s-\(n)")
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

enum Scripted: SourcePlugin {
    static let info = PluginInfo(type: "scripted", kind: .source, summary: "", folder: "", options: [], sample: "{}")
    static func configure(_ options: inout OptionReader) {}
    static func makeSource(_ c: Void, context: ComponentContext) throws -> any PositionSource {
        ScriptedSource([.positions((1...5).map(fix)), .positions([fix(6)])])
    }
}
enum Collect: SinkPlugin {
    static let collector = PositionCollector()
    static let info = PluginInfo(type: "collect", kind: .sink, summary: "", folder: "", options: [], sample: "{}")
    static func configure(_ options: inout OptionReader) {}
    static func makeSink(_ c: Void, context: ComponentContext) throws -> any PositionSink { CollectingSink(collector: collector) }
}

@Suite(.timeLimit(.minutes(3))) struct ManualClockTests {
    @Test func nowMovesOnlyWhenAdvanced() {
        let clock = ManualClock(start: Timestamp(milliseconds: 1000))
        #expect(clock.now().milliseconds == 1000)
        clock.advance(by: .seconds(2))
        #expect(clock.now().milliseconds == 3000)
    }

    @Test func sleepersWakeWhenTheirTimeComes() async throws {
        let clock = ManualClock()
        let woke = Counter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await clock.sleep(for: .seconds(5)); woke.value.add(1, ordering: .relaxed) }
            #expect(await Poll.until { clock.sleeperCount == 1 })
            clock.advance(by: .seconds(4))
            try await Task.sleep(for: .milliseconds(50))
            #expect(woke.value.load(ordering: .relaxed) == 0)
            clock.advance(by: .seconds(1))
            try await group.waitForAll()
        }
        #expect(woke.value.load(ordering: .relaxed) == 1)
    }

    @Test func sleepThrowsWhenCancelled() async {
        let clock = ManualClock()
        let result = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do { try await clock.sleep(for: .seconds(3600)); return false } catch { return error is CancellationError }
            }
            _ = await Poll.until { clock.sleeperCount == 1 }
            group.cancelAll()
            return await group.next() ?? false
        }
        #expect(result)
        #expect(clock.sleeperCount == 0)
    }

    @Test func monotonicTimeMovesWithWallTime() {
        let clock = ManualClock(start: Timestamp(milliseconds: 1000))
        let start = clock.monotonicNow()
        clock.advance(by: .milliseconds(1500))
        #expect(clock.monotonicNow() - start == .milliseconds(1500))
        #expect(clock.now().milliseconds == 2500)
    }

    @Test func timersFireAtTheirDeadlineInOrderUnlessCancelled() {
        let clock = ManualClock()
        let fired = Locked<[String]>([])
        let now = clock.monotonicNow()
        clock.wake(at: now + .seconds(2)) { fired.withLock { $0.append("two") } }
        clock.wake(at: now + .seconds(1)) { fired.withLock { $0.append("one") } }
        let cancelled = clock.wake(at: now + .seconds(1)) { fired.withLock { $0.append("cancelled") } }
        cancelled.cancel()
        #expect(clock.waiterCount == 2)
        #expect(clock.nextDeadline == .seconds(1))
        clock.advance(by: .milliseconds(999))
        #expect(fired.withLock { $0 }.isEmpty)
        clock.advance(by: .seconds(5))
        #expect(fired.withLock { $0 } == ["one", "two"])
        // A deadline already past fires at once.
        clock.wake(at: now) { fired.withLock { $0.append("past") } }
        #expect(fired.withLock { $0 }.last == "past")
    }

    @Test func fastForwardingRunsEveryWaitWithoutRealTime() async throws {
        let clock = ManualClock()
        let started = ContinuousClock.now
        try await clock.fastForwarding {
            for _ in 0..<10 { try await clock.sleep(for: .seconds(3600)) }
        }
        #expect(clock.monotonicNow().sinceOrigin == .seconds(36_000))
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}

@Suite(.timeLimit(.minutes(1))) struct SystemClockTests {
    @Test func sleepUntilAndTimersFollowTheMonotonicTimeline() async throws {
        let clock = SystemClock.system
        let deadline = clock.monotonicNow() + .milliseconds(30)
        try await clock.sleep(until: deadline)
        #expect(clock.monotonicNow() >= deadline)
        let fired = Locked<MonotonicInstant?>(nil)
        let target = clock.monotonicNow() + .milliseconds(20)
        clock.wake(at: target) { fired.withLock { $0 = clock.monotonicNow() } }
        #expect(await Poll.until { fired.withLock { $0 } != nil })
        #expect(try #require(fired.withLock { $0 }) >= target)
        let cancelled = Locked(false)
        clock.wake(at: clock.monotonicNow() + .milliseconds(10)) { cancelled.withLock { $0 = true } }.cancel()
        try await Task.sleep(for: .milliseconds(50))
        #expect(!cancelled.withLock { $0 })
    }
}

@Suite(.timeLimit(.minutes(3))) struct ScriptedSourceTests {
    @Test func playsItsScriptOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let collector = PositionCollector()
        let source = ScriptedSource([.positions([fix(1), fix(2)]), .delay(.seconds(10)), .positions([fix(3)])], clock: clock)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run(output: collector.output) }
            #expect(await Poll.until { clock.sleeperCount == 1 })
            #expect(collector.count == 2)
            clock.advance(by: .seconds(10))
            try await group.waitForAll()
        }
        #expect(collector.positions.map(\.id) == ["s-1", "s-2", "s-3"])
        #expect(collector.batches == 2)
    }

    @Test func countsBytesItCannotDecodeAndDecodesTheRest() async throws {
        let stats = ComponentStats(id: "sources.s")
        let collector = PositionCollector()
        try await ScriptedSource([.bytes([1, 2, 3])], stats: stats).run(output: collector.output)
        #expect(stats.value("scripted.undecoded_bytes") == 3)
        try await ScriptedSource([.bytes([7])], decodeBytes: { b in [fix(Int(b[0]))] }).run(output: collector.output)
        #expect(collector.positions.map(\.id) == ["s-7"])
    }

    @Test func aHeldOpenSourcePassesTheCancellationCheck() async throws {
        try await SourceConformance.checkCancellation { ctx in ScriptedSource([.positions([fix(1)])], holdOpen: true, clock: ctx.clock) }
    }

    @Test func feedsAWholePipelineIntoACollectingSink() async throws {
        var registry = PluginRegistry()
        registry.register(source: Scripted.self)
        registry.register(sink: Collect.self)
        let config = try PipelineConfiguration.load(json: Array(#"{ "settings": { "stats_interval": false }, "sources": { "s": { "type": "scripted" } }, "sinks": { "c": { "type": "collect", "inputs": ["s"] } } }"#.utf8), registry: registry)
        let log = RecordingLogHandler(minimumLevel: .info)
        let code = await (try Pipeline(configuration: config, logHandler: log)).run()
        #expect(code == 0)
        #expect(Collect.collector.positions.map(\.id) == (1...6).map { "s-\($0)" })
        #expect(!log.entries(level: .info, containing: "starting").isEmpty)
    }
}

@Suite(.timeLimit(.minutes(3))) struct SourceConformanceTests {
    /// Ignores cancellation for a minute (without using a CPU): the check must fail rather than hang.
    struct Stubborn: PositionSource {
        func run(output: SourceOutput) async throws {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().asyncAfter(deadline: .now() + 60) { c.resume() }
            }
        }
    }

    /// Throws on bad input, against the contract.
    struct Throwing: PositionSource {
        struct Bad: Error {}
        func run(output: SourceOutput) async throws { throw Bad() }
    }

    @Test func failsASourceThatIgnoresCancellation() async {
        await #expect(throws: SourceConformance.Failure.self) {
            try await SourceConformance.checkCancellation(runFor: .milliseconds(10), within: .milliseconds(300)) { _ in Stubborn() }
        }
    }

    @Test func failsASourceThatThrowsOnBadInput() async {
        await #expect(throws: SourceConformance.Failure.self) {
            try await SourceConformance.checkBadInputCounted(feedGarbage: {}) { _ in Throwing() }
        }
    }

    @Test func passesASourceThatCountsBadInput() async throws {
        try await SourceConformance.checkBadInputCounted(counters: ["scripted.undecoded_bytes"], feedGarbage: {}) { ctx in
            ScriptedSource([.bytes([0, 0xff])], holdOpen: true, stats: ctx.stats)
        }
    }

    @Test func failsASourceThatNeverReconnects() async {
        await #expect(throws: SourceConformance.Failure.self) {
            try await SourceConformance.checkReconnects(within: .milliseconds(500), settle: .zero, peerDown: {}, peerUp: {}) { _ in
                ScriptedSource([.positions([fix(1)])], holdOpen: true)
            }
        }
    }
}

@Suite(.timeLimit(.minutes(3))) struct RecordingLogHandlerTests {
    @Test func recordsLinesAtOrAboveItsLevel() {
        let log = RecordingLogHandler(minimumLevel: .info)
        let logger = log.logger(label: "sources.rx")
        logger.debug("hidden")
        logger.warning("stderr: hello")
        #expect(log.entries.map(\.description) == ["warning sources.rx: stderr: hello"])
        #expect(log.entries(level: .warning, containing: "hello").count == 1)
    }
}
