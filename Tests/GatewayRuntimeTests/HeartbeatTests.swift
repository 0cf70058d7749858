import Dispatch
import GatewayCore
import GatewayRuntime
import GatewayTesting
import Locking
import Synchronization
import Testing

/// Records what the runtime's heartbeat reports, as the systemd notifier would receive it.
final class RecordingMonitor: PipelineMonitor {
    let heartbeatInterval: Duration = .milliseconds(50)
    let stallLimit: Duration = .milliseconds(300)
    private let beats = Locked<[PipelineHeartbeat]>([])
    private let startedFlag = Atomic<Bool>(false)
    var started: Bool { startedFlag.load(ordering: .relaxed) }

    var all: [PipelineHeartbeat] { beats.withLock { $0 } }
    func pipelineStarted(_ heartbeat: PipelineHeartbeat) { startedFlag.store(true, ordering: .relaxed) }
    func heartbeat(_ heartbeat: PipelineHeartbeat) { beats.withLock { $0.append(heartbeat) } }
}

/// Closed until opened: what a transform stuck on a lock looks like from outside.
final class Gate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func pass() { semaphore.wait(); semaphore.signal() }
    func open() { semaphore.signal() }
}

/// Blocks its calling thread inside `process` until the gate opens.
struct BlockingTransform: PositionTransform {
    let gate: Gate
    mutating func process(_ position: Position, into output: inout [Position]) {
        gate.pass()
        output.append(position)
    }
}

@Suite struct HeartbeatTests {
    func source(_ id: String, _ s: some PositionSource) -> PipelineConfiguration.Component {
        .init(id: id, kind: .source, type: "test", prepared: PreparedComponent { _ in .source(s) })
    }
    func transform(_ id: String, _ inputs: [String], _ t: some PositionTransform) -> PipelineConfiguration.Component {
        .init(id: id, kind: .transform, type: "test", inputs: inputs, prepared: PreparedComponent { _ in .transform(t) })
    }
    func sink(_ id: String, _ inputs: [String], _ s: some PositionSink, buffer: PipelineConfiguration.BufferSettings = .init()) -> PipelineConfiguration.Component {
        .init(id: id, kind: .sink, type: "test", inputs: inputs, buffer: buffer, prepared: PreparedComponent { _ in .sink(s) })
    }
    var quiet: PipelineConfiguration.Settings { .init(shutdownTimeout: .seconds(5), statsInterval: nil) }

    @Test(.timeLimit(.minutes(1))) func aTransformStuckInsideACallIsReportedWedgedUntilItMovesAgain() async throws {
        let gate = Gate()
        let recorder = Recorder()
        let config = PipelineConfiguration(
            sources: [source("rx", ListSource(positions: track(20), batchSize: 5, waitForCancellation: true))],
            transforms: [transform("stuck", ["rx"], BlockingTransform(gate: gate))],
            sinks: [sink("out", ["stuck"], RecordingSink(recorder: recorder))],
            settings: quiet)
        let pipeline = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        let monitor = RecordingMonitor()
        async let code = pipeline.run(monitor: monitor)

        let wedged = await Poll.until { monitor.all.contains { $0.wedged.contains { $0.hasPrefix("transforms.stuck:") } } }
        #expect(wedged)
        // It holds the pipeline's one thread too.
        #expect(monitor.all.contains { $0.wedged.contains { $0.hasPrefix("threads: one job running for ") } })
        #expect(monitor.started)
        gate.open()
        let count = monitor.all.count
        let recovered = await Poll.until { monitor.all.dropFirst(count).contains { $0.progressing } }
        #expect(recovered)
        #expect(await Poll.until { recorder.all.count == 20 })
        pipeline.shutdown(reason: "test")
        #expect(await code == 0)
    }

    @Test(.timeLimit(.minutes(1))) func aSlowSinkThatKeepsTakingIsNeverWedged() async throws {
        let recorder = Recorder()
        // 40 batches at 20 ms each through a buffer of one batch: the buffer is never empty for
        // long (0.8 s in all, beyond the 0.3 s stall limit), but the sink keeps taking.
        let config = PipelineConfiguration(
            sources: [source("rx", ListSource(positions: track(400), batchSize: 10))],
            sinks: [sink("slow", ["rx"], RecordingSink(recorder: recorder, delayPerBatch: .milliseconds(20)), buffer: .init(maxPositions: 10))],
            settings: quiet)
        let pipeline = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        let monitor = RecordingMonitor()
        #expect(await pipeline.run(monitor: monitor) == 0)
        #expect(recorder.all.count == 400)
        #expect(monitor.all.count >= 5)
        #expect(monitor.all.allSatisfy { $0.progressing })
        #expect(monitor.all.last?.positionsIn == 400)
    }
}
