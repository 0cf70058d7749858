import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
import Locking
import Testing

/// The name the kernel has for the calling thread.
func threadName() -> String {
    let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
    return comm.trimmingCharacters(in: .newlines)
}

/// Thread names seen, by who saw them.
final class ThreadLog: Sendable {
    let names = Locked<[String: Set<String>]>([:])
    func note(_ who: String) { let n = threadName(); names.withLock { _ = $0[who, default: []].insert(n) } }
    var all: [String: Set<String>] { names.withLock { $0 } }
}

struct NotingSource: PositionSource {
    let log: ThreadLog
    let positions: [Position]
    func run(output: SourceOutput) async throws {
        for i in stride(from: 0, to: positions.count, by: 10) {
            log.note("source")
            await output.emit(Array(positions[i..<min(positions.count, i + 10)]))
        }
    }
}

struct NotingTransform: PositionTransform {
    let log: ThreadLog
    mutating func process(_ position: Position, into output: inout [Position]) {
        log.note("transform")
        output.append(position)
    }
}

struct NotingSink: PositionSink {
    let log: ThreadLog
    let recorder: Recorder
    func run(input: any SinkInput) async throws {
        while let batch = await input.next() {
            log.note("sink")
            recorder.positions.withLock { $0.append(contentsOf: batch) }
            input.acknowledge()
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct PipelineThreadsTests {
    func pipeline(threads: Int, log: ThreadLog, recorder: Recorder) throws -> Pipeline {
        let config = PipelineConfiguration(
            sources: [.init(id: "rx", kind: .source, type: "test", prepared: PreparedComponent { _ in .source(NotingSource(log: log, positions: track(200))) })],
            transforms: [.init(id: "t", kind: .transform, type: "test", inputs: ["rx"], prepared: PreparedComponent { _ in .transform(NotingTransform(log: log)) })],
            sinks: [.init(id: "out", kind: .sink, type: "test", inputs: ["t"], buffer: .init(maxPositions: 16), prepared: PreparedComponent { _ in .sink(NotingSink(log: log, recorder: recorder)) })],
            settings: .init(shutdownTimeout: .seconds(5), statsInterval: nil, threads: threads))
        return try Pipeline(configuration: config, logHandler: SilentLogHandler())
    }

    @Test func everyComponentRunsOnThePipelinesOneThread() async throws {
        let log = ThreadLog(), recorder = Recorder()
        #expect(try await pipeline(threads: 1, log: log, recorder: recorder).run() == 0)
        #expect(recorder.all.map(\.id) == track(200).map(\.id))
        #expect(log.all == ["source": ["locgate"], "transform": ["locgate"], "sink": ["locgate"]])
    }

    @Test func withSeveralThreadsTheComponentsRunOnThoseOnly() async throws {
        // A hundred pipelines: threads started from a Dispatch thread once kept its name in 2-3% of them.
        for _ in 0..<100 {
            let log = ThreadLog(), recorder = Recorder()
            #expect(try await pipeline(threads: 3, log: log, recorder: recorder).run() == 0)
            #expect(recorder.all.map(\.id) == track(200).map(\.id))
            let seen = log.all.values.reduce(into: Set<String>()) { $0.formUnion($1) }
            #expect(seen.isSubset(of: ["locgate-1", "locgate-2", "locgate-3"]), "\(seen)")
            #expect(Set(log.all.keys) == ["source", "transform", "sink"])
        }
    }

    /// A sink that blocks its thread in a synchronous wait until the gate opens.
    struct BlockingSink: PositionSink {
        let gate: Gate
        let recorder: Recorder
        func run(input: any SinkInput) async throws {
            gate.pass()
            while let batch = await input.next() {
                recorder.positions.withLock { $0.append(contentsOf: batch) }
                input.acknowledge()
            }
        }
    }

    func twoSinks(threads: Int, gate: Gate, blocked: Recorder, other: Recorder) throws -> Pipeline {
        let config = PipelineConfiguration(
            sources: [.init(id: "rx", kind: .source, type: "test", prepared: PreparedComponent { _ in .source(ListSource(positions: track(20), batchSize: 5, waitForCancellation: true)) })],
            sinks: [.init(id: "stuck", kind: .sink, type: "test", inputs: ["rx"], buffer: .init(maxPositions: 100), prepared: PreparedComponent { _ in .sink(BlockingSink(gate: gate, recorder: blocked)) }),
                    .init(id: "other", kind: .sink, type: "test", inputs: ["rx"], buffer: .init(maxPositions: 100), prepared: PreparedComponent { _ in .sink(RecordingSink(recorder: other)) })],
            settings: .init(shutdownTimeout: .seconds(5), statsInterval: nil, threads: threads))
        return try Pipeline(configuration: config, logHandler: SilentLogHandler())
    }

    @Test func aComponentThatBlocksTheOneThreadIsReportedAndTheRestResumeAfterIt() async throws {
        let gate = Gate(), blocked = Recorder(), other = Recorder()
        let pipeline = try twoSinks(threads: 1, gate: gate, blocked: blocked, other: other)
        let monitor = RecordingMonitor()
        async let code = pipeline.run(monitor: monitor)
        #expect(await Poll.until { monitor.all.contains { $0.wedged.contains { $0.hasPrefix("threads: one job running for ") } } })
        #expect(other.all.count < 20, "the other sink ran beside a blocked thread")
        gate.open()
        #expect(await Poll.until { blocked.all.count == 20 && other.all.count == 20 })
        let count = monitor.all.count
        #expect(await Poll.until { monitor.all.dropFirst(count).contains { $0.progressing } })
        pipeline.shutdown(reason: "test")
        #expect(await code == 0)
    }

    @Test func withTwoThreadsABlockedSinkLeavesTheOtherRunning() async throws {
        let gate = Gate(), blocked = Recorder(), other = Recorder()
        let pipeline = try twoSinks(threads: 2, gate: gate, blocked: blocked, other: other)
        async let code = pipeline.run()
        #expect(await Poll.until { other.all.count == 20 })
        #expect(blocked.all.isEmpty)
        gate.open()
        #expect(await Poll.until { blocked.all.count == 20 })
        pipeline.shutdown(reason: "test")
        #expect(await code == 0)
    }

    @Test func thousandsOfQueuedJobsAllRunOnTheThreads() async throws {
        let threads = PipelineThreads(count: 2, name: "lg-many")
        defer { threads.stop() }
        // More jobs at once than the queue keeps before dropping the ones taken. Counted from an
        // unstructured task, so a job the queue loses fails the test instead of hanging it.
        final class Counts: Sendable { let byThread = Locked<[String: Int]>([:]) }
        let counts = Counts()
        Task(executorPreference: threads) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<5000 { group.addTask { let n = threadName(); counts.byThread.withLock { $0[n, default: 0] += 1 } } }
            }
        }
        #expect(await Poll.until(timeout: .seconds(30)) { counts.byThread.withLock { $0.values.reduce(0, +) } == 5000 })
        let seen = counts.byThread.withLock { $0 }
        #expect(Set(seen.keys).isSubset(of: ["lg-many-1", "lg-many-2"]), "\(seen)")
    }

    @Test func aTaskThatSleepsOrYieldsComesBackToTheThread() async throws {
        // Sources pace and sinks retry with sleeps. swiftlang/swift#74395 reports Swift 6.0
        // resuming such a task on the global pool; 6.3 here does not, and this keeps it so.
        let threads = PipelineThreads(count: 1, name: "lg-sleep")
        defer { threads.stop() }
        for _ in 0..<20 {
            let names = try await withTaskExecutorPreference(threads) {
                try await Task.sleep(for: .milliseconds(1))
                let afterSleep = threadName()
                await Task.yield()
                return [afterSleep, threadName()]
            }
            #expect(names == ["lg-sleep", "lg-sleep"])
        }
    }

    @Test func threadsEndAfterStopAndAJobThatComesLaterStillRuns() async throws {
        let threads = PipelineThreads(count: 2, name: "lg-test")
        let before = await withTaskExecutorPreference(threads) { threadName() }
        #expect(before.hasPrefix("lg-test-"))
        threads.stop()
        #expect(await Poll.until { threads.liveThreads == 0 })
        // A continuation resumed after the pipeline stopped: a thread starts for it and ends.
        let after = await withTaskExecutorPreference(threads) { threadName() }
        #expect(after.hasPrefix("lg-test-"))
        #expect(await Poll.until { threads.liveThreads == 0 })
    }

    @Test func aReloadThatChangesTheThreadsSaysItNeedsARestart() async throws {
        let config = PipelineConfiguration(
            sources: [.init(id: "rx", kind: .source, type: "test", prepared: PreparedComponent { _ in .source(ListSource(positions: track(3), waitForCancellation: true)) })],
            sinks: [.init(id: "out", kind: .sink, type: "test", inputs: ["rx"], prepared: PreparedComponent { _ in .sink(RecordingSink(recorder: Recorder())) })],
            settings: .init(shutdownTimeout: .seconds(5), statsInterval: nil))
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        async let code = p.run()
        var changed = config
        changed.settings.threads = 2
        let outcome = await p.reload(configuration: changed)
        #expect(outcome.status == .applied)
        #expect(outcome.needsRestart == ["settings.threads"])
        p.shutdown(reason: "test")
        #expect(await code == 0)
    }
}
