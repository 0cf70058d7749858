import GatewayCore
import GatewayRuntime
import GatewayTesting
import Locking
import DeliveryEngine
import Testing

/// A memory queue keeps nothing through a crash: what its sink received is acknowledged upstream
/// (to a broker, to a device waiting for its answer) only once it left the queue.
@Suite struct MemoryQueueAcknowledgementTests {
    final class Handled: Sendable {
        let batches = Locked<[Int]>([])
        func note(_ n: Int) { batches.withLock { $0.append(n) } }
        var all: [Int] { batches.withLock { $0 } }
    }

    /// Sends batches 1, 2, 3 (of that many positions) through a buffer, each read and committed by
    /// the writer as a sink does; each batch's end-to-end acknowledgement notes its size.
    func send(_ buffer: SinkBuffer, _ handled: Handled, committingWith writer: OutboxWriter) async throws {
        for n in 1...3 {
            let positions = (0..<n).map { Position(time: Timestamp(milliseconds: Int64(n * 10 + $0)), latitude: 1, longitude: 2) }
            let output = SourceOutput(tracking: { batch, ack in await buffer.send(batch, acknowledgement: ack) })
            await output.emit(positions) { handled.note(n) }
            let batch = try #require(await buffer.next())
            #expect(batch.count == n)
            try await writer.commit(entries(batch), acknowledging: buffer)
        }
    }

    func entries(_ batch: [Position]) -> [OutboxEntry] {
        batch.map { OutboxEntry(id: $0.id, payload: [1], time: $0.time?.milliseconds) }
    }

    @Test func acknowledgesWhatLeftTheQueueNotWhatEnteredIt() async throws {
        let context = SourceConformance.makeContext(id: "upload")
        let outbox = MemoryOutbox(capacity: 100)
        let writer = OutboxWriter(outbox: outbox, mode: .memory(maxRecords: 100), context: context)
        let buffer = SinkBuffer(capacity: 100, policy: .block, durable: false, stats: context.stats)
        let handled = Handled()
        try await send(buffer, handled, committingWith: writer)
        // In the queue, not delivered: nothing is acknowledged.
        #expect(handled.all.isEmpty)
        // The first three records leave (batches 1 and 2): those two are handled, not batch 3.
        try outbox.remove(through: 3)
        #expect(handled.all == [1, 2])
        try outbox.remove([5, 4, 6])
        #expect(handled.all == [1, 2, 3])
    }

    @Test func countsWhatTheCapDroppedAsHandled() async throws {
        let context = SourceConformance.makeContext(id: "upload")
        let outbox = MemoryOutbox(capacity: 2)
        let writer = OutboxWriter(outbox: outbox, mode: .memory(maxRecords: 2), context: context)
        let buffer = SinkBuffer(capacity: 100, policy: .block, durable: false, stats: context.stats)
        let handled = Handled()
        // Six records into a queue of two: the oldest four are dropped (lossy by the cap).
        try await send(buffer, handled, committingWith: writer)
        #expect(handled.all == [1, 2])
        try outbox.remove(through: 6)
        #expect(handled.all == [1, 2, 3])
    }

    @Test func aDurableQueueAcknowledgesAtCommit() async throws {
        let dir = try makeTemporaryDirectory()
        let context = SourceConformance.makeContext(id: "upload")
        let mode = OutboxMode.disk(path: dir + "/q.sqlite", maxRecords: 100, maxAge: nil, synchronousFull: true)
        let outbox = try OutboxOptions.open(mode, context: context)
        defer { outbox.close() }
        let writer = OutboxWriter(outbox: outbox, mode: mode, context: context)
        let buffer = SinkBuffer(capacity: 100, policy: .block, durable: true, stats: context.stats)
        let handled = Handled()
        try await send(buffer, handled, committingWith: writer)
        #expect(handled.all == [1, 2, 3])
    }
}
