import GatewayCore
import GatewayRuntime
import GatewayTesting
import Locking
import Synchronization
import Testing

/// A source that emits batches with acknowledgements, at most `window.limit` outstanding, and
/// records which batches were acknowledged.
final class AckingSource: PositionSource {
    let positions: [Position]
    let batchSize: Int
    let window: UnacknowledgedWindow
    let acked = Locked<[String]>([])
    let emitted = Atomic<Int>(0)

    init(positions: [Position], batchSize: Int, window: UnacknowledgedWindow) {
        self.positions = positions
        self.batchSize = batchSize
        self.window = window
    }

    var ackedIDs: [String] { acked.withLock { $0 } }

    func run(output: SourceOutput) async throws {
        var i = 0
        while i < positions.count {
            let batch = Array(positions[i..<min(positions.count, i + batchSize)])
            await window.acquire(batch.count)
            emitted.add(batch.count, ordering: .relaxed)
            await output.emit(batch) {
                self.acked.withLock { $0 += batch.map(\.id) }
                self.window.release(batch.count)
            }
            i += batchSize
        }
        // Stay up until cancelled, as a broker source does, so the test sees the acks arrive.
        while true { try await Task.sleep(for: .milliseconds(5)) }
    }
}

/// A sink that reads batches at once but acknowledges them only when the test opens the gate.
final class GatedSink: PositionSink {
    let received = Locked<[String]>([])
    let open = Atomic<Bool>(false)

    var receivedIDs: [String] { received.withLock { $0 } }

    func run(input: any SinkInput) async throws {
        var unacked = false
        while true {
            switch await input.next(timeout: .milliseconds(5)) {
            case .positions(let batch):
                received.withLock { $0 += batch.map(\.id) }
                unacked = true
            case .timeout: break
            case .end: return
            }
            if unacked && open.load(ordering: .relaxed) {
                input.acknowledge()
                unacked = false
            }
        }
    }
}

/// Drops every position whose index is odd; emits an extra "event" position after each kept one.
struct OddDropperWithEvents: PositionTransform {
    mutating func process(_ position: Position, into output: inout [Position]) {
        guard let n = Int(position.id.split(separator: "-").last ?? ""), n % 2 == 0 else { return }
        output.append(position)
        var event = position
        event.id += ".event"
        output.append(event)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct AcknowledgementTests {
    func source(_ id: String, _ s: some PositionSource) -> PipelineConfiguration.Component {
        .init(id: id, kind: .source, type: "test", prepared: PreparedComponent { _ in .source(s) })
    }
    func transform(_ id: String, _ inputs: [String], _ t: some PositionTransform) -> PipelineConfiguration.Component {
        .init(id: id, kind: .transform, type: "test", inputs: inputs, prepared: PreparedComponent { _ in .transform(t) })
    }
    func sink(_ id: String, _ inputs: [String], _ s: some PositionSink, durable: Bool = false) -> PipelineConfiguration.Component {
        .init(id: id, kind: .sink, type: "test", inputs: inputs, prepared: PreparedComponent(durable: durable) { _ in .sink(s) })
    }
    var quiet: PipelineConfiguration.Settings { .init(shutdownTimeout: .seconds(5), statsInterval: nil) }

    /// Runs the pipeline while `body` looks at it, then shuts it down.
    func running(_ config: PipelineConfiguration, _ body: () async throws -> Void) async throws {
        let p = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        async let code = p.run()
        try await body()
        p.shutdown(reason: "test over")
        #expect(await code == 0)
    }

    @Test(arguments: [false, true])
    func aBatchIsAcknowledgedOnlyAfterItsSinkAcknowledgedIt(durable: Bool) async throws {
        let src = AckingSource(positions: track(30), batchSize: 10, window: UnacknowledgedWindow(limit: 1000))
        let gated = GatedSink()
        let config = PipelineConfiguration(sources: [source("rx", src)], sinks: [sink("out", ["rx"], gated, durable: durable)], settings: quiet)
        try await running(config) {
            #expect(await Poll.until { gated.receivedIDs.count == 30 })
            #expect(src.ackedIDs.isEmpty)
            gated.open.store(true, ordering: .relaxed)
            #expect(await Poll.until { src.ackedIDs.count == 30 })
            #expect(Set(src.ackedIDs) == Set(track(30).map(\.id)))
        }
    }

    @Test func fanOutToTwoSinksAcknowledgesAfterBoth() async throws {
        let src = AckingSource(positions: track(20), batchSize: 5, window: UnacknowledgedWindow(limit: 1000))
        let fast = CollectingSink()
        let gated = GatedSink()
        let config = PipelineConfiguration(sources: [source("rx", src)],
                                           sinks: [sink("fast", ["rx"], fast), sink("slow", ["rx"], gated)], settings: quiet)
        try await running(config) {
            #expect(await fast.collector.waitForCount(20))
            #expect(await Poll.until { gated.receivedIDs.count == 20 })
            #expect(src.ackedIDs.isEmpty, "acknowledged before the second sink took the positions")
            gated.open.store(true, ordering: .relaxed)
            #expect(await Poll.until { src.ackedIDs.count == 20 })
        }
    }

    @Test func droppedPositionsAreHandledAndDerivedEventsBelongToTheirPosition() async throws {
        let src = AckingSource(positions: track(10), batchSize: 1, window: UnacknowledgedWindow(limit: 1000))
        let gated = GatedSink()
        let config = PipelineConfiguration(sources: [source("rx", src)],
                                           transforms: [transform("odd", ["rx"], OddDropperWithEvents())],
                                           sinks: [sink("out", ["odd"], gated)], settings: quiet)
        try await running(config) {
            // The odd ones were dropped: handled at once. The even ones wait for the sink.
            #expect(await Poll.until { src.ackedIDs.count == 5 })
            #expect(src.ackedIDs.sorted() == ["src-1", "src-3", "src-5", "src-7", "src-9"])
            #expect(await Poll.until { gated.receivedIDs.count == 10 })
            #expect(gated.receivedIDs.contains("src-4.event"))
            gated.open.store(true, ordering: .relaxed)
            #expect(await Poll.until { src.ackedIDs.count == 10 })
        }
    }

    @Test func maxUnackedBoundsWhatASourceHasOutstanding() async throws {
        let src = AckingSource(positions: track(100), batchSize: 10, window: UnacknowledgedWindow(limit: 25))
        let gated = GatedSink()
        let config = PipelineConfiguration(sources: [source("rx", src)], sinks: [sink("out", ["rx"], gated)], settings: quiet)
        try await running(config) {
            // 20 fit; the third batch of 10 would pass 25 and waits.
            #expect(await Poll.until { gated.receivedIDs.count == 20 })
            #expect(await Poll.until { src.window.waiting == 1 })
            #expect(src.emitted.load(ordering: .relaxed) == 20)
            #expect(src.window.outstanding == 20)
            gated.open.store(true, ordering: .relaxed)
            #expect(await Poll.until { src.ackedIDs.count == 100 })
            #expect(src.window.outstanding == 0)
        }
    }
}
