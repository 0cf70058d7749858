import GatewayCore
import Testing
@testable import Filters

/// The runtime's path: whole batches through `process(batch:)` give what positions one at a
/// time give.
@Suite struct FilterBatchTests {
    /// Positions with attributes that change, repeat and come back, and one without a time.
    var positions: [Position] {
        var ps = (0..<8).map { fix(Double($0), north: Double($0)) }
        ps[1].attributes = ["fleet": "south"]
        ps[2].attributes = ["fleet": "south"]
        ps[4].attributes = ["keep": "yes"]
        ps[5].device = nil
        ps[6] = fix(nil)
        ps[7].mode = .noFix
        return ps
    }

    func oneAtATime(_ transform: some PositionTransform, _ positions: [Position]) -> [Position] {
        var t = transform
        var out: [Position] = []
        for p in positions { t.process(p, into: &out) }
        return out
    }

    @Test(arguments: [true, false])
    func setBatchMatchesPositionAtATime(overwrite: Bool) throws {
        let (c, problems) = try configure(SetPlugin.self, #"{"device": "cfg", "attributes": {"fleet": "north", "vip": "1"}, "overwrite": \#(overwrite)}"#)
        #expect(problems.isEmpty)
        let expected = oneAtATime(SetTransform(configuration: c), positions)
        var t = SetTransform(configuration: c)
        var batch = positions
        t.process(batch: &batch)
        #expect(batch == expected)
        #expect(batch[1].attributes == (overwrite ? ["fleet": "north", "vip": "1"] : ["fleet": "south", "vip": "1"]))
        #expect(batch[4].attributes == ["fleet": "north", "vip": "1", "keep": "yes"])
        #expect(batch[3].attributes == ["fleet": "north", "vip": "1"])
    }

    @Test func qualityFilterBatchDropsAndCountsLikePositionAtATime() {
        let stats = ComponentStats(id: "t")
        var t = QualityFilterTransform(configuration: QualityFilterConfiguration(), stats: stats)
        var batch = positions
        batch[3].event = FenceEvent(kind: .noData)
        batch[3].mode = .noFix
        let expected = oneAtATime(QualityFilterTransform(configuration: QualityFilterConfiguration(), stats: ComponentStats(id: "u")), batch)
        t.process(batch: &batch)
        #expect(batch == expected)
        #expect(batch.map(\.id) == ["a-0.0-0.0", "a-1.0-1.0", "a-2.0-2.0", "a-3.0-3.0", "a-4.0-4.0", "a-5.0-5.0"])
        #expect(stats.value("dropped.no_time") == 1)
        #expect(stats.value("dropped.mode") == 1)
        #expect(stats.dropped == 2)
    }
}
