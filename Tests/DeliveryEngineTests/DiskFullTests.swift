import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import DeliveryEngine
import Testing

/// A disk that fills during a run: the batch is held (upstream waits), the error is logged at
/// once, and the commit goes through when space comes back. Nothing is lost.
@Suite(.serialized, .enabled(if: Tmpfs.canMount, "needs root to mount a small tmpfs"), .timeLimit(.minutes(1)))
struct DiskFullTests {
    @Test func aDiskThatFillsMidRunIsLoggedAtOnceAndTheBatchWaitsForSpace() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let disk = dir + "/disk"
        #expect(Tmpfs.mount(disk, kilobytes: 2048))
        defer { Tmpfs.unmount(disk) }
        let log = RecordingLogHandler()
        let stats = ComponentStats(id: "up")
        let context = ComponentContext(id: "up", kind: .sink, logger: log.logger(label: "sinks.up"), stats: stats)
        let mode = OutboxMode.disk(path: disk + "/q.sqlite", maxRecords: 1_000_000, maxAge: nil, synchronousFull: true)
        let outbox = try OutboxOptions.open(mode, context: context)
        let writer = OutboxWriter(outbox: outbox, mode: mode, context: context, retryInterval: .milliseconds(20))
        let buffer = SinkBuffer(capacity: 100, policy: .block, durable: true, stats: stats)
        try await writer.commit(entries(0..<10), acknowledging: buffer)
        // Fill the disk to the last block.
        Tmpfs.sh("dd if=/dev/zero of='\(disk)/fill' bs=4k 2>/dev/null")
        let big = (10..<2000).map { OutboxEntry(id: "p\($0)", payload: Array(repeating: UInt8(ascii: "x"), count: 200), time: nil) }
        let committing = Task { try await writer.commit(big, acknowledging: buffer) }
        #expect(await Poll.until { stats.value("queue.disk_full") == 1 })
        #expect(await Poll.until { !log.entries(level: .error, containing: "full").isEmpty }, "\(log.entries())")
        #expect(outbox.depth == 10)
        try FileManager.default.removeItem(atPath: disk + "/fill")
        try await committing.value
        #expect(outbox.depth == 2000)
        #expect(stats.value("queue.disk_full") == 0)
        #expect(try outbox.oldest(limit: 5000).map(\.id) == (0..<2000).map { "p\($0)" })
        #expect(!log.entries(level: .warning, containing: "committing again").isEmpty)
    }

    /// The broker loop's delete of acknowledged records runs on the outbox's thread while
    /// publishing goes on: on a full disk it is kept and tried again, said once, and nothing is
    /// published twice for want of it.
    @Test func theDeleteOfAcknowledgedMessagesWaitsForSpaceWithoutResending() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let disk = dir + "/disk"
        #expect(Tmpfs.mount(disk, kilobytes: 2048))
        defer { Tmpfs.unmount(disk) }
        let outbox = try SQLiteOutbox(path: disk + "/q.sqlite", maxRecords: 1_000_000, synchronousFull: true)
        let h = LoopHarness(outbox: outbox, window: 100)
        let t = FakeTransport { _, _ in nil }
        let stats = h.stats
        try await h.run(t, (0..<50).map { position($0) }) {
            #expect(await Poll.until { t.heldCount == 50 })
            Tmpfs.sh("dd if=/dev/zero of='\(disk)/fill' bs=4k 2>/dev/null")
            t.release()
            #expect(await Poll.until { stats.value("queue.disk_full") == 1 }, "\(h.log.entries())")
            #expect(await Poll.until { stats.value("queue.write_failures") >= 3 }, "retried")
            #expect(outbox.depth == 50)
            try? FileManager.default.removeItem(atPath: disk + "/fill")
        }
        #expect(outbox.depth == 0)
        #expect(stats.value("queue.disk_full") == 0)
        #expect(t.sent.map(\.id) == (0..<50).map { "p\($0)" })
        let lines = h.log.entries(level: .error, containing: "full")
        #expect(lines.count == 1 && lines[0].message.contains("delete"), "\(h.log.entries())")
        #expect(h.log.entries(level: .warning, containing: "done after").count == 1, "\(h.log.entries())")
    }
}
