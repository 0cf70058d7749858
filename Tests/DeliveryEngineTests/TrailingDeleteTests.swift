import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import DeliveryEngine
import Locking
import Testing

/// The writes behind a batch sink's requests as a state machine (``TrailingDelete``): events in,
/// writes out, no task or queue.
@Suite struct TrailingDeleteTests {
    typealias Write = TrailingDelete.Write

    @Test func anIdleMachineStartsTheDeleteAndTheMarkBehindTheRequest() {
        var m = TrailingDelete()
        #expect(m.behind(accepted: 0, marking: nil, count: 10) == .nothing, "nothing delivered, no mark: no write")
        #expect(m.phase == .idle)
        #expect(m.behind(accepted: 10, marking: 20, count: 10) == .start(Write(deleting: 10, marking: 20, count: 10)))
        #expect(m.phase == .running && m.through == 10)
        #expect(m.writeEnded(failed: false) == nil)
        #expect(m.phase == .idle && m.through == 10)
        // Delivered no further: only the mark.
        #expect(m.behind(accepted: 10, marking: 30, count: 10) == .start(Write(deleting: nil, marking: 30, count: 10)))
    }

    @Test func whileAWriteRunsOneMarkWaitsBehindItAndANewerOneReplacesItDeletingAsFarAsBoth() {
        var m = TrailingDelete()
        #expect(m.behind(accepted: 10, marking: 20, count: 10) == .start(Write(deleting: 10, marking: 20, count: 10)))
        #expect(m.behind(accepted: 20, marking: 30, count: 10) == .nothing)
        #expect(m.queued == Write(deleting: 20, marking: 30, count: 10))
        #expect(m.behind(accepted: 30, marking: 40, count: 5) == .nothing)
        #expect(m.queued == Write(deleting: 30, marking: 40, count: 5))
        // Delivered no further than the queued write deletes: it keeps its delete, takes the new mark.
        #expect(m.behind(accepted: 30, marking: 50, count: 7) == .nothing)
        #expect(m.queued == Write(deleting: 30, marking: 50, count: 7))
        #expect(m.through == 30)
        #expect(m.writeEnded(failed: false) == Write(deleting: 30, marking: 50, count: 7))
        #expect(m.phase == .running && m.queued == nil)
        #expect(m.writeEnded(failed: false) == nil)
        #expect(m.phase == .idle)
    }

    @Test func withoutAMarkNothingWaitsBehindTheRunningWrite() {
        var m = TrailingDelete()
        _ = m.behind(accepted: 10, marking: nil, count: 10)
        #expect(m.behind(accepted: 20, marking: nil, count: 10) == .nothing)
        #expect(m.queued == nil && m.through == 10, "a later write deletes what was delivered since")
        #expect(m.writeEnded(failed: false) == nil)
        #expect(m.behind(accepted: 20, marking: nil, count: 10) == .start(Write(deleting: 20, marking: nil, count: 10)))
    }

    @Test func aFailedWriteGivesItsRangeBackDropsTheWaitingOneAndFailsTheNextLook() throws {
        var m = TrailingDelete()
        _ = m.behind(accepted: 10, marking: nil, count: 10)
        _ = m.writeEnded(failed: false)
        _ = m.behind(accepted: 20, marking: 25, count: 5)
        _ = m.behind(accepted: 30, marking: 40, count: 10)
        #expect(m.through == 30)
        #expect(m.writeEnded(failed: true) == nil)
        #expect(m.phase == .failed && m.queued == nil)
        #expect(m.through == 10, "the stop's cleanup deletes 11…30 again")
        #expect(m.behind(accepted: 40, marking: 50, count: 10) == .fail)
        #expect(m.phase == .idle)
        // Seen by a write the request waits for as well.
        _ = m.behind(accepted: 40, marking: nil, count: 10)
        _ = m.writeEnded(failed: true)
        #expect(throws: TrailingDelete.Failed.self) { try m.awaited(accepted: 40, marking: nil, count: 0, durably: false) }
    }

    @Test func anAwaitedWriteDeletesOnlyWhatIsNewAndCountsOnceDone() throws {
        var m = TrailingDelete()
        #expect(try m.awaited(accepted: 0, marking: nil, count: 0, durably: false) == nil)
        #expect(try m.awaited(accepted: 10, marking: nil, count: 0, durably: false) == Write(deleting: 10, marking: nil, count: 0))
        #expect(m.through == 0, "not deleted until it is written")
        m.written(through: 10)
        #expect(try m.awaited(accepted: 10, marking: nil, count: 0, durably: false) == nil)
        #expect(try m.awaited(accepted: 10, marking: 15, count: 5, durably: true) == Write(deleting: nil, marking: 15, count: 5, durably: true))
        #expect(try m.awaited(accepted: 15, marking: 19, count: 4, durably: true) == Write(deleting: 15, marking: 19, count: 4, durably: true))
    }
}

/// A batch sink with a durable queue sends its next batch without waiting for the delete of the
/// last (``TrailingWrites``). Here another process holds the queue file's write lock, as a slow
/// disk's fsync holds the queue's thread: every full batch goes while no delete can run, and the
/// deletes run once the lock is released.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct TrailingWritesOnALockedQueueTests {
    final class Recorder: Sendable {
        let batches = Locked<[[String]]>([])
        var count: Int { batches.withLock { $0.count } }
    }

    /// A batch is the ids of its records; every batch is accepted. With `release`, the third
    /// waits in `send` until the test lets it go.
    struct Transport: OutboxBatchTransport {
        let recorder: Recorder
        var release: AsyncStream<Void>?
        func encode(_ records: [OutboxRecord]) throws -> (batch: [String], count: Int) { (records.map(\.id), records.count) }
        func send(_ batch: [String], records: [OutboxRecord]) async throws -> OutboxBatchOutcome {
            let n = recorder.batches.withLock { $0.append(batch); return $0.count }
            if n == 3, let release { for await _ in release { break } }
            return .accepted
        }
    }

    /// A durable queue of 50 records, its sink's loop sending them in full batches of 10 (marked
    /// in flight) over `transport`, while `body` runs with another process holding the file's
    /// write lock. Then the lock goes and the input ends: every batch went once, in order, and
    /// the queue is empty, with no mark left.
    static func withLockedQueue(_ transport: Transport, _ body: (_ outbox: any Outbox, _ holder: SQLiteLockHolder) async throws -> Void) async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/q.sqlite"
        let queue = try DiskQueue(path: path)
        let outbox = queue.outbox
        defer { outbox.close() }
        _ = try outbox.append(entries(0..<50), at: Timestamp(milliseconds: 1000))
        let loop = OutboxBatchLoop(writer: queue.writer, options: .init(
            maxRecords: 10, maxBytes: 1 << 20, interval: .seconds(60), retryInitial: .seconds(1), retryMax: .seconds(1),
            retryMaxAttempts: 0, marksInFlight: true, statsPrefix: "test"))
        let input = SinkBuffer(capacity: 100, policy: .block, durable: true, stats: ComponentStats(id: "up"))
        let holder = try SQLiteLockHolder(path: path)
        defer { holder.finish() }
        let run = Task {
            try await loop.run(input: input, transport: transport, encoder: { { _ in OutboxEntry(id: "", payload: [], time: nil) } })
        }
        try await body(outbox, holder)
        holder.finish()
        input.close()
        try await run.value
        #expect(transport.recorder.batches.withLock { $0 } == (0..<5).map { b in (b * 10..<b * 10 + 10).map { "p\($0)" } })
        #expect(outbox.depth == 0)
        #expect(try outbox.oldest(limit: 10).isEmpty)
        #expect(outbox.inFlightThrough == nil)
    }

    @Test func fullBatchesGoWhileTheQueueCannotWrite() async throws {
        let recorder = Recorder()
        try await Self.withLockedQueue(Transport(recorder: recorder)) { outbox, _ in
            #expect(await Poll.until(timeout: .seconds(3)) { recorder.count == 5 }, "sent \(recorder.count) of 5 batches while the queue could not write")
            #expect(outbox.depth == 50, "a delete went through while the file was locked: the test proves nothing")
        }
    }

    /// A full batch that goes while a write is still running has its in-flight mark written after
    /// that write, with the delete of the batches delivered before it (a restart with other
    /// limits must read it as it went); a newer mark replaces one still waiting, so the queue's
    /// thread never falls behind by more than one.
    @Test func aFullBatchSentWhileAWriteRunsIsMarkedAfterIt() async throws {
        let recorder = Recorder()
        let (release, letGo) = AsyncStream<Void>.makeStream()
        try await Self.withLockedQueue(Transport(recorder: recorder, release: release)) { outbox, holder throws in
            // The first batch's mark waits for the lock; the second's and then the third's wait behind it.
            #expect(await Poll.until(timeout: .seconds(3)) { recorder.count == 3 }, "sent \(recorder.count) of 3 batches")
            #expect(outbox.inFlightThrough == nil, "a mark went through while the file was locked: the test proves nothing")
            holder.finish()
            #expect(await Poll.until(timeout: .seconds(3)) { outbox.inFlightThrough == 30 },
                    "the third batch (p20…p29) is in flight, but the mark says \(outbox.inFlightThrough.map(String.init) ?? "none")")
            // A mark covers the queue from its front: the two batches delivered before it went with it.
            #expect(try outbox.oldest(limit: 1).map(\.id) == ["p20"])
            letGo.yield()
        }
    }
}
