import PluginCatalog
import GatewayCore
@testable import GatewayRuntime
import GatewayTesting
import Synchronization
import Testing

/// A source's `reorder_window` holds each device's positions and releases them in fix-time order
/// (issue 30, item 3), keeping their end-to-end acknowledgement until they are handled.
@Suite(.timeLimit(.minutes(1)))
struct ReorderWindowTests {
    func fix(_ t: Int64?, device: String = "a") -> Position {
        Position(time: t.map { Timestamp(milliseconds: 1_700_000_000_000 + $0 * 1000) }, latitude: 1, longitude: 2,
                 source: "s", device: device, id: "\(device)\(t.map(String.init) ?? "-")")
    }

    @Test func aLateFixWithinTheWindowIsReleasedInItsPlace() {
        let w = ReorderWindow(window: .seconds(5))
        w.add([fix(10), fix(12)], acknowledgement: nil, now: 0)
        w.add([fix(11), fix(3, device: "b")], acknowledgement: nil, now: 2_000)
        #expect(w.release(now: 4_999).positions.isEmpty, "nothing held for the window yet")
        // a's first batch is due: every a up to its newest due fix goes, in time order.
        #expect(w.release(now: 5_000).positions.map(\.id) == ["a10", "a11", "a12"])
        #expect(w.held == 1)
        #expect(w.release(now: 7_000).positions.map(\.id) == ["b3"])
        #expect(w.held == 0)
    }

    @Test func onlyPositionsNotNewerThanTheLastDueOneGo() {
        let w = ReorderWindow(window: .seconds(5))
        w.add([fix(10)], acknowledgement: nil, now: 0)
        w.add([fix(20), fix(9), fix(nil)], acknowledgement: nil, now: 3_000)
        // 10 is due; 9 (older, arrived later) goes before it; 20 waits for its own window.
        #expect(w.release(now: 5_000).positions.map(\.id) == ["a-", "a9", "a10"])
        #expect(w.release(now: 8_000).positions.map(\.id) == ["a20"])
        w.add([fix(30), fix(25)], acknowledgement: nil, now: 9_000)
        #expect(w.release(now: 9_001, all: true).positions.map(\.id) == ["a25", "a30"], "everything at the end")
    }

    /// A batch is acknowledged upstream only when all its positions were released and handled.
    @Test func aBatchIsAcknowledgedWhenItsLastHeldPositionIsHandled() {
        let w = ReorderWindow(window: .seconds(1))
        let acknowledged = Atomic<Bool>(false)
        let ack = BatchAcknowledgement { acknowledged.store(true, ordering: .relaxed) }
        w.add([fix(1), fix(5, device: "b")], acknowledgement: ack, now: 0)
        ack.release()   // the emitter's own hold
        w.add([fix(9, device: "b")], acknowledgement: nil, now: 500)
        let first = w.release(now: 1_000)
        #expect(first.positions.map(\.id) == ["a1", "b5"], "b9 has not been held for the window yet")
        for h in first.holds.prefix(1) { h.done() }
        let early = acknowledged.load(ordering: .relaxed)
        #expect(!early, "one of the batch's positions is not handled yet")
        for h in first.holds.dropFirst() { h.done() }
        let done = acknowledged.load(ordering: .relaxed)
        #expect(done)
    }

    /// Through a pipeline: a fix delivered behind a newer one reaches the distance filter in order
    /// and is not late; without the window it is.
    @Test(arguments: [true, false])
    func inAPipelineALateFixIsNotLate(window: Bool) async throws {
        let path = try Self.track()
        var config = try PipelineConfiguration.load(json: Array("""
        {"settings":{"stats_interval":false},
         "sources":{"in":{"type":"file","path":"\(path)"\(window ? #","reorder_window":"300ms""# : "")}},
         "transforms":{"moved":{"type":"distance_filter","inputs":["in"],"min_distance_m":0}},
         "sinks":{"out":{"type":"stdout","inputs":["moved"]}}}
        """.utf8), registry: BuiltinPlugins.registry)
        #expect(config.sources.first?.reorderWindow == (window ? .milliseconds(300) : nil))
        let collector = PositionCollector()
        config.sinks[0].prepared = PreparedComponent { _ in .sink(CollectingSink(collector: collector)) }
        let pipeline = try Pipeline(configuration: config, logHandler: SilentLogHandler())
        #expect(await pipeline.run() == 0)
        let moved = try #require(pipeline.componentStats.first { $0.id == "transforms.moved" })
        if window {
            #expect(collector.positions.map(\.id) == ["p1", "p2", "p3"])
            #expect(pipeline.componentStats.first { $0.id == "sources.in" }?.value("reorder.held") == 0)
            #expect(moved.value("late") == 0)
        } else {
            #expect(collector.positions.map(\.id) == ["p1", "p3", "p2"])
            #expect(moved.value("late") == 1)
        }
    }

    /// While the source stays open, the window releases on its own once positions fall due.
    @Test func theWindowReleasesWhileTheSourceRuns() async throws {
        let positions = [fix(1), fix(3), fix(2)]
        var source = PipelineConfiguration.Component(id: "in", kind: .source, type: "test",
                                                     prepared: PreparedComponent { _ in .source(ListSource(positions: positions, batchSize: 1, waitForCancellation: true)) })
        source.reorderWindow = .milliseconds(200)
        let collector = PositionCollector()
        let sink = PipelineConfiguration.Component(id: "out", kind: .sink, type: "test", inputs: ["in"],
                                                   prepared: PreparedComponent { _ in .sink(CollectingSink(collector: collector)) })
        let pipeline = try Pipeline(configuration: PipelineConfiguration(sources: [source], sinks: [sink]), logHandler: SilentLogHandler())
        async let status = pipeline.run()
        #expect(await collector.waitForCount(3))
        #expect(collector.positions.map(\.id) == ["a1", "a2", "a3"])
        pipeline.shutdown(reason: "test")
        #expect(await status == 0)
    }

    static func track() throws -> String {
        let dir = try makeTemporaryDirectory()
        let path = dir + "/track.jsonl"
        try """
        {"id":"p1","time":"2026-01-01T00:00:01Z","lat":1,"lon":2,"device":"a"}
        {"id":"p3","time":"2026-01-01T00:00:03Z","lat":1.001,"lon":2,"device":"a"}
        {"id":"p2","time":"2026-01-01T00:00:02Z","lat":1.0005,"lon":2,"device":"a"}

        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
