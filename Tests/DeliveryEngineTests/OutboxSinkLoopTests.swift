import Dispatch
import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import DeliveryEngine
import Locking
import Testing

/// A broker client double: answers each publish from another thread, as client libraries do.
final class FakeTransport: OutboxTransport {
    struct Sent: Sendable {
        var id: String
        var retain: Bool
    }

    private struct State {
        var sent: [Sent] = []
        var attempts: [String: Int] = [:]
        var inFlight = 0
        var maxInFlight = 0
        var connected = true
        var held: [@Sendable (OutboxAck) -> Void] = []
    }

    private let state = Locked(State())
    /// The answer for a record on its n-th attempt (1-based); nil holds the answer until `release`.
    let answer: @Sendable (OutboxRecord, Int) -> OutboxAck?

    init(unpublishable: Set<String> = [], answer: @escaping @Sendable (OutboxRecord, Int) -> OutboxAck? = { _, _ in .accepted }) {
        self.unpublishable = unpublishable
        self.answer = answer
    }

    struct NotConnected: Error {}

    /// Ids the transport refuses to take at all (an invalid topic, say).
    let unpublishable: Set<String>

    func publish(_ record: OutboxRecord, retain: Bool, done: @escaping @Sendable (OutboxAck) -> Void) throws {
        if unpublishable.contains(record.id) { throw OutboxRejection(reason: "invalid topic") }
        let attempt: Int = try state.withLock { s in
            guard s.connected else { throw NotConnected() }
            s.attempts[record.id, default: 0] += 1
            s.sent.append(Sent(id: record.id, retain: retain))
            s.inFlight += 1
            s.maxInFlight = max(s.maxInFlight, s.inFlight)
            return s.attempts[record.id] ?? 1
        }
        let finish: @Sendable (OutboxAck) -> Void = { ack in
            self.state.withLock { $0.inFlight -= 1 }
            done(ack)
        }
        guard let ack = answer(record, attempt) else {
            state.withLock { $0.held.append(finish) }
            return
        }
        DispatchQueue.global().async { finish(ack) }
    }

    var sent: [Sent] { state.withLock { $0.sent } }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }
    var heldCount: Int { state.withLock { $0.held.count } }
    func attempts(_ id: String) -> Int { state.withLock { $0.attempts[id] ?? 0 } }
    func setConnected(_ c: Bool) { state.withLock { $0.connected = c } }

    /// Answers every held publish, newest first (a broker may acknowledge out of order).
    func release(_ ack: OutboxAck = .accepted) {
        let held = state.withLock { s in
            let h = s.held
            s.held = []
            return h
        }
        for f in held.reversed() { f(ack) }
    }
}

func position(_ i: Int, device: String = "d") -> Position {
    Position(time: Timestamp(milliseconds: 1_714_521_600_000 + Int64(i) * 1000), latitude: 31 + Double(i) * 1e-4, longitude: 121,
             mode: .threeD, source: "s", device: device, id: "p\(i)")
}

struct LoopHarness {
    let outbox: any Outbox
    let stats = ComponentStats(id: "up")
    let log = RecordingLogHandler()
    let loop: OutboxSinkLoop
    let buffer: SinkBuffer

    init(outbox: any Outbox = MemoryOutbox(capacity: 100_000), window: Int, retainNewestPerKey: Bool = false) {
        self.outbox = outbox
        let context = ComponentContext(id: "up", kind: .sink, logger: log.logger(label: "sinks.up"), stats: stats)
        loop = OutboxSinkLoop(outbox: outbox, mode: .memory(maxRecords: 100_000), context: context, window: window,
                              retainNewestPerKey: retainNewestPerKey, statsPrefix: "fake",
                              retryInitial: .milliseconds(5), retryMax: .milliseconds(50))
        // As the pipeline builds it: a sink with a memory queue is not durable (its upstream does
        // not wait), one with a disk queue is.
        buffer = SinkBuffer(capacity: 10_000, policy: .block, durable: !(outbox is MemoryOutbox), stats: stats)
    }

    static func encode(_ p: Position) -> OutboxEntry {
        OutboxEntry(id: p.id, key: p.device ?? "", payload: Array(p.id.utf8), time: p.time?.milliseconds)
    }

    /// Feeds `positions` in batches of 10, closes the input, and runs the loop to its end.
    func run(_ transport: FakeTransport, _ positions: [Position], during: @Sendable @escaping () async -> Void = {}) async throws {
        let loop = self.loop, buffer = self.buffer
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await loop.run(input: buffer, transport: transport, encode: LoopHarness.encode) }
            for start in stride(from: 0, to: positions.count, by: 10) {
                await buffer.send(Array(positions[start..<min(positions.count, start + 10)]))
            }
            await during()
            buffer.close()
            try await group.waitForAll()
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct OutboxSinkLoopTests {
    @Test func everyRecordIsPublishedOnceWithinTheWindowAndDeletedOnItsAck() async throws {
        let h = LoopHarness(window: 8)
        let t = FakeTransport()
        try await h.run(t, (0..<500).map { position($0) })
        #expect(t.sent.map(\.id) == (0..<500).map { "p\($0)" })
        #expect(t.maxInFlight <= 8)
        #expect(h.outbox.depth == 0)
        #expect(h.stats.value("fake.sent") == 500)
        #expect(h.stats.emitted == 500)
    }

    @Test func nothingIsDeletedBeforeItsAcknowledgement() async throws {
        let h = LoopHarness(window: 100)
        let t = FakeTransport { _, _ in nil }
        try await h.run(t, (0..<50).map { position($0) }) {
            #expect(await Poll.until { t.heldCount == 50 })
            #expect(h.outbox.depth == 50)
            t.release()
        }
        #expect(h.outbox.depth == 0)
    }

    @Test func aRetriedMessageIsSentAgainAndNothingIsLost() async throws {
        let h = LoopHarness(window: 4)
        let t = FakeTransport { r, attempt in
            (r.id == "p3" || r.id == "p7") && attempt < 3 ? .retry(reason: "timeout") : .accepted
        }
        try await h.run(t, (0..<20).map { position($0) })
        #expect(Set(t.sent.map(\.id)) == Set((0..<20).map { "p\($0)" }))
        #expect(t.attempts("p3") == 3)
        #expect(t.attempts("p7") == 3)
        #expect(t.attempts("p4") == 1)
        #expect(h.stats.value("fake.retried") == 4)
        #expect(h.outbox.depth == 0)
        #expect(!h.log.entries(level: .warning, containing: "not acknowledged: timeout").isEmpty)
    }

    @Test func aRejectedMessageGoesToTheDeadLettersAndTheRestFlows() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
        let h = LoopHarness(outbox: outbox, window: 4)
        let t = FakeTransport { r, _ in r.id == "p5" ? .rejected(reason: "not authorised") : .accepted }
        try await h.run(t, (0..<12).map { position($0) })
        #expect(try outbox.deadLetterCount() == 1)
        #expect(h.stats.value("queue.dead_lettered") == 1)
        #expect(h.stats.value("fake.sent") == 11)
        #expect(outbox.depth == 0)
        #expect(!h.log.entries(level: .error, containing: "p5").isEmpty)
    }

    @Test func aMessageThatCanNeverBePublishedIsDeadLetteredAndDoesNotBlockTheRest() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
        let h = LoopHarness(outbox: outbox, window: 4)
        let t = FakeTransport(unpublishable: ["p2"])
        try await h.run(t, (0..<10).map { position($0) })
        #expect(t.sent.map(\.id) == (0..<10).filter { $0 != 2 }.map { "p\($0)" })
        #expect(try outbox.deadLetterCount() == 1)
        #expect(outbox.depth == 0)
    }

    @Test func aTransportThatCannotTakeMessagesIsRetriedWithoutLoss() async throws {
        let h = LoopHarness(window: 4)
        let t = FakeTransport()
        t.setConnected(false)
        try await h.run(t, (0..<30).map { position($0) }) {
            #expect(await Poll.until { !h.log.entries(level: .warning, containing: "cannot publish").isEmpty })
            #expect(t.sent.isEmpty)
            t.setConnected(true)
        }
        #expect(t.sent.map(\.id) == (0..<30).map { "p\($0)" })
        #expect(h.outbox.depth == 0)
    }

    /// A backlog goes out unretained; only the newest queued message of each key is retained.
    @Test func onlyTheNewestQueuedMessageOfAKeyIsRetained() async throws {
        let outbox = MemoryOutbox(capacity: 100)
        let backlog = [position(0, device: "a"), position(1, device: "a"), position(2, device: "b"), position(3, device: "a")]
        _ = try outbox.append(backlog.map(LoopHarness.encode), at: Timestamp(milliseconds: 0))
        let h = LoopHarness(outbox: outbox, window: 2, retainNewestPerKey: true)
        let t = FakeTransport()
        try await h.run(t, [])
        #expect(t.sent.map(\.id) == ["p0", "p1", "p2", "p3"])
        #expect(t.sent.map(\.retain) == [false, false, true, true])
    }

    @Test func aRestartResumesFromTheQueue() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let outbox = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
            _ = try outbox.append((0..<7).map { LoopHarness.encode(position($0)) }, at: Timestamp(milliseconds: 0))
        }
        let outbox = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
        let h = LoopHarness(outbox: outbox, window: 3)
        let t = FakeTransport()
        try await h.run(t, (7..<10).map { position($0) })
        #expect(t.sent.map(\.id) == (0..<10).map { "p\($0)" })
        #expect(outbox.depth == 0)
        #expect(!h.log.entries(level: .info, containing: "resuming with 7").isEmpty)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct AckInboxTests {
    @Test func acceptancesWakeThePublisherInBatchesAndAtTheEndOfABurst() {
        let signal = OutboxSignal(clock: ManualClock())
        let inbox = AckInbox(signal: signal, wakeEvery: 3)
        for _ in 0..<5 { inbox.handedOver() }
        inbox.post(1, .accepted)
        inbox.post(2, .accepted)
        #expect(!signal.hasPost)
        inbox.post(3, .accepted)
        #expect(signal.hasPost)
        #expect(inbox.take().map(\.0) == [1, 2, 3])
        signal.clear()
        inbox.post(4, .accepted)
        #expect(!signal.hasPost)
        // The last one outstanding: nothing more will come to fill a batch.
        inbox.post(5, .accepted)
        #expect(signal.hasPost)
    }

    @Test func aRetryOrARefusalWakesThePublisherAtOnce() {
        let signal = OutboxSignal(clock: ManualClock())
        let inbox = AckInbox(signal: signal, wakeEvery: 100)
        for _ in 0..<10 { inbox.handedOver() }
        inbox.post(1, .retry(reason: "lost"))
        #expect(signal.hasPost)
        signal.clear()
        inbox.post(2, .rejected(reason: "too big"))
        #expect(signal.hasPost)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct OutboxSignalTests {
    @Test func aTimedWaitEndsAtItsTimeoutWithNoFlags() async {
        let clock = ManualClock()
        let signal = OutboxSignal(clock: clock)
        async let waited = signal.wait(timeout: .seconds(10))
        #expect(await clock.waitForWaiters(1))
        clock.advance(by: .seconds(9))
        #expect(signal.isWaiting)
        clock.advance(by: .seconds(1))
        let flags = await waited
        #expect(!flags.ended && !flags.flushAll)
    }

    @Test func aTimedWaitEndsAtAPostWithItsFlags() async {
        let signal = OutboxSignal(clock: ManualClock())
        async let waited = signal.wait(timeout: .seconds(600))
        signal.post(ended: true)
        #expect(await waited.ended)
        // A post before the wait is not lost either.
        signal.post(flushAll: true)
        #expect(await signal.wait(timeout: .seconds(600)).flushAll)
    }
}
