import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import DeliveryEngine
import Locking
import Testing

/// A durable queue commits on a thread of its own: while a commit waits (here for a lock another
/// process holds on the file, as it would wait for a slow disk's fsync), the other components on
/// the pipeline's one thread go on.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct CommitThreadTests {
    @Test func aCommitThatWaitsDoesNotHoldThePipelinesThread() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/q.sqlite"
        let queue = try DiskQueue(path: path)
        let outbox = queue.outbox
        defer { outbox.close() }
        let writer = queue.writer
        let buffer = SinkBuffer(capacity: 100, policy: .block, durable: true, stats: ComponentStats(id: "up"))

        // Another process takes the file's write lock and keeps it until told to commit.
        let holder = try SQLiteLockHolder(path: path)
        defer { holder.finish() }

        let threads = PipelineThreads(count: 1, name: "locgate-test")
        defer { threads.stop() }
        let committed = Flag()
        let commit = Task(executorPreference: threads) {
            try await writer.commit([OutboxEntry(id: "p0", payload: Array("{}".utf8), time: nil)], acknowledging: buffer)
            committed.set()
        }
        // A second component on the same single thread runs while the commit waits.
        let other = Flag()
        Task(executorPreference: threads) { other.set() }
        #expect(await Poll.until(timeout: .seconds(3)) { other.isSet })
        #expect(!committed.isSet, "the commit did not wait for the lock: the test proves nothing")
        holder.finish()
        try await commit.value
        #expect(committed.isSet)
        #expect(try outbox.oldest(limit: 10).map(\.id) == ["p0"])
    }
}

/// A durable queue (`synchronous` full) of the sink "up" at `path`, and its writer.
struct DiskQueue {
    let outbox: any Outbox
    let writer: OutboxWriter

    init(path: String) throws {
        let context = ComponentContext(id: "up", kind: .sink, logger: RecordingLogHandler().logger(label: "sinks.up"), stats: ComponentStats(id: "up"))
        let mode = OutboxMode.disk(path: path, maxRecords: 1_000_000, maxAge: nil, synchronousFull: true)
        outbox = try OutboxOptions.open(mode, context: context)
        writer = OutboxWriter(outbox: outbox, mode: mode, context: context)
    }
}

/// A thread-safe one-way flag.
final class Flag: Sendable {
    private let value = Locked(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
