import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
import DeliveryEngine
import Testing

/// `queue.depth` and `queue.oldest_age_s` are read when the stats are read: after a replay at
/// `rate: max` to a server that is down, nothing is committed any more, yet the queue ages.
@Suite struct QueueGaugeTests {
    @Test func theOldestAgeKeepsGrowingWhileNothingIsCommitted() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock()
        let stats = ComponentStats(id: "sinks.up")
        let context = ComponentContext(id: "up", kind: .sink, logger: RecordingLogHandler().logger(label: "sinks.up"), stats: stats, clock: clock)
        let mode = OutboxMode.disk(path: dir + "/q.sqlite", maxRecords: 1_000_000, maxAge: nil, synchronousFull: false)
        let outbox = try OutboxOptions.open(mode, context: context)
        defer { outbox.close() }
        let writer = OutboxWriter(outbox: outbox, mode: mode, context: context)
        let buffer = SinkBuffer(capacity: 100, policy: .block, durable: true, stats: stats)
        // Fix times of an old log: the age counts from the commit.
        let old = Timestamp(year: 2019, month: 3, day: 1).milliseconds
        try await writer.commit((0..<1000).map { OutboxEntry(id: "p\($0)", payload: Array("{}".utf8), time: old + Int64($0) * 1000) }, acknowledging: buffer)
        #expect(stats.value("queue.depth") == 1000)
        #expect(stats.value("queue.oldest_age_s") == 0)
        clock.advance(by: .seconds(95))
        #expect(stats.value("queue.oldest_age_s") == 95)
        #expect(stats.namedValues.contains { $0.name == "queue.oldest_age_s" && $0.value == 95 })
        try outbox.remove(through: 400)
        #expect(stats.value("queue.depth") == 600)
        try outbox.remove(through: 1000)
        #expect(stats.value("queue.depth") == 0)
        #expect(stats.value("queue.oldest_age_s") == 0)
    }
}
