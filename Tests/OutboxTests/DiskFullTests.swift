import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import Outbox
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
        #expect(await eventually { stats.value("queue.disk_full") == 1 })
        #expect(await eventually { !log.entries(level: .error, containing: "full").isEmpty }, "\(log.entries())")
        #expect(outbox.depth == 10)
        try FileManager.default.removeItem(atPath: disk + "/fill")
        try await committing.value
        #expect(outbox.depth == 2000)
        #expect(stats.value("queue.disk_full") == 0)
        #expect(try outbox.oldest(limit: 5000).map(\.id) == (0..<2000).map { "p\($0)" })
        #expect(!log.entries(level: .warning, containing: "committing again").isEmpty)
    }
}
