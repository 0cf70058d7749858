import Foundation
import GatewayCore
import GatewayRuntime
@testable import HTTPOutput
import DeliveryEngine
import GatewayTesting
import Synchronization
import Testing

/// The sink against the real receiver script, in process, on a ``ManualClock``: intervals,
/// backoffs and Retry-After pass when the test moves time, not in real time.
@Suite(.timeLimit(.minutes(3)), .serialized) struct DeliveryTests {
    func config(_ receiver: Receiver, _ dir: String?, _ extra: String = "", batch: String = #"{"max_positions":100,"interval":"1h"}"#) -> String {
        let queue = dir.map { #"{"path":"\#($0)/queue.sqlite"}"# } ?? "null"
        return #"{"url":"\#(receiver.url)","batch":\#(batch),"retry":{"initial":"20ms","max":"200ms"},"queue":\#(queue)\#(extra)}"#
    }

    @Test func batchesByCountThenFlushesTheRestAtTheEnd() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let harness = try Harness(try configuration(config(receiver, dir)), clock: ManualClock())
        try await harness.run { buffer in
            await buffer.send(positions(0..<250))
            // Two full batches go before the input ends; the rest waits for the (long) interval or the end.
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count == 2 })
        }
        let sizes = receiver.accepted().map { $0.ids.count }
        #expect(sizes == [100, 100, 50])
        #expect(receiver.accepted().flatMap(\.ids) == positions(0..<250).map(\.id))
        #expect(harness.stats.value("http.sent") == 250)
        #expect(harness.stats.value("queue.depth") == 0)
    }

    @Test func batchesByBytes() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":1000,"max_bytes":2048,"interval":"1h"}"#)),
                                  clock: ManualClock())
        try await harness.run { buffer in
            await buffer.send(positions(0..<40))
            // The byte limit alone triggers sending before the end.
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count >= 2 })
        }
        let accepted = receiver.accepted()
        #expect(accepted.allSatisfy { $0.body.utf8.count <= 2048 })
        #expect(accepted.flatMap(\.ids) == positions(0..<40).map(\.id))
    }

    @Test func flushesOnTheIntervalWithoutNewPositions() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let clock = ManualClock()
        let harness = try Harness(try configuration(config(receiver, nil, batch: #"{"max_positions":3,"interval":"200ms"}"#)), clock: clock)
        try await harness.run { buffer in
            // A full batch first, so the sink is sending and then idle, whenever it started.
            await buffer.send(positions(0..<3))
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count == 1 })
            // Committed (a memory queue: `send` does not wait for it), then waiting for the
            // interval: nothing goes before it, and it goes at the interval without more positions.
            await buffer.send(positions(3..<5))
            #expect(await Poll.until(timeout: .seconds(30)) { harness.stats.value("queue.depth") == 2 })
            #expect(await clock.waitForWaiters(1))
            clock.advance(by: .milliseconds(199))
            try await Task.sleep(for: .milliseconds(50))
            #expect(receiver.requests().count == 1)
            clock.advance(by: .milliseconds(1))
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count == 2 })
        }
        #expect(receiver.accepted().map { $0.ids.count } == [3, 2])
    }

    @Test func fixesArrivingDuringARequestWaitForTheNextInterval() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        // The first request is held by the receiver until the file `release` exists.
        let release = dir + "/release"
        try await receiver.control(#"{"rules":[{"times":1,"hold":"\#(release)"}]}"#)
        let clock = ManualClock()
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":100,"interval":"1s"}"#)), clock: clock)
        try await harness.run { buffer in
            await buffer.send(positions(0..<3))
            #expect(await clock.waitForWaiters(1))
            clock.advance(by: .seconds(1))
            // The interval flush is in flight: one fix arrives now and one after its answer; both
            // wait for the next interval instead of going out one request each.
            #expect(await Poll.until(timeout: .seconds(30)) { (try? await receiver.rulesLeft()) == 0 })
            await buffer.send(positions(3..<4))
            _ = FileManager.default.createFile(atPath: release, contents: nil)
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count == 1 })
            await buffer.send(positions(4..<5))
            #expect(await clock.waitForWaiters(1))
            try await Task.sleep(for: .milliseconds(50))
            #expect(receiver.requests().count == 1, "nothing goes before the interval")
            clock.advance(by: .seconds(1))
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count >= 2 })
        }
        #expect(receiver.accepted().map { $0.ids.count } == [3, 2])
    }

    @Test func aStreamWithoutPausesStillFlushesOnTheInterval() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let clock = ManualClock()
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":100000,"max_bytes":100000000,"interval":"300ms"}"#)),
                                  clock: clock)
        // An input that always has the next position (it never times out), 50 ms of the clock
        // apart: only the interval check after each commit flushes, every 7th position (the
        // first at 50 ms, the 7th at 350 ms). Before the position after a flush, the input waits
        // for the flush to arrive, so the batches do not depend on how fast the request is.
        let stream = SteadyStream(positions(0..<30), clock: clock, step: .milliseconds(50)) { i in
            if i > 0 && i % 7 == 0 { _ = await Poll.until(timeout: .seconds(30)) { receiver.accepted().count == i / 7 } }
        }
        try await harness.sink.run(input: stream)
        #expect(receiver.accepted().map { $0.ids.count } == [7, 7, 7, 7, 2])
        #expect(receiver.accepted().flatMap(\.ids) == positions(0..<30).map(\.id))
    }

    @Test func anOutageLosesNothingAndKeepsOrder() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let clock = ManualClock()
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":100,"interval":"100ms"}"#)), clock: clock)
        try await clock.fastForwarding {
            try await harness.run { buffer in
                await buffer.send(positions(0..<150))
                #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count >= 1 })
                receiver.stop()
                for k in 0..<10 { await buffer.send(positions((150 + k * 100)..<(250 + k * 100))) }
                #expect(await Poll.until(timeout: .seconds(30)) { harness.stats.value("http.retried") >= 3 })
                try receiver.start()
            }
        }
        let ids = receiver.accepted().flatMap(\.ids)
        #expect(ids == positions(0..<1150).map(\.id))
        #expect(harness.stats.value("queue.depth") == 0)
    }

    @Test func aRejectedBatchGoesToDeadLettersAndLaterBatchesFlow() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        try await receiver.control(#"{"rules":[{"match":"\"id\":\"t-150\"","status":400,"body":{"error":"bad point"}}]}"#)
        let harness = try Harness(try configuration(config(receiver, dir)), clock: ManualClock())
        try await harness.run { buffer in await buffer.send(positions(0..<300)) }
        #expect(receiver.accepted().flatMap(\.ids) == positions(0..<100).map(\.id) + positions(200..<300).map(\.id))
        #expect(harness.stats.value("queue.dead_lettered") == 100)
        let queue = try SQLiteOutbox(path: dir + "/queue.sqlite", maxRecords: 1000, synchronousFull: true)
        #expect(try queue.deadLetterCount() == 100)
        #expect(queue.depth == 0)
    }

    @Test(arguments: [
        (#"{"times":3,"status":500}"#, ""),
        (#"{"times":1,"status":429,"retry_after":"1"}"#, ""),
        (#"{"times":2,"status":503}"#, #","gzip":true"#),
        (#"{"times":2,"drop":true}"#, ""),
        (#"{"times":1,"delay":0.5}"#, #","timeout":"200ms""#),
        (#"{"times":2,"status":200,"body":{"code":1}}"#, #","success":{"json":{"path":"code","equals":0}}"#),
        // Redirects are not followed: Foundation would re-send without the body and the 2xx at
        // the end would delete a batch the server never got.
        (#"{"times":1,"status":301,"location":"/final"}"#, ""),
        (#"{"times":1,"status":302,"location":"/final"}"#, ""),
        (#"{"times":1,"status":307,"location":"/final"}"#, ""),
        (#"{"times":1,"status":308,"location":"/final"}"#, ""),
    ])
    func transientFailuresAreRetriedUntilDelivered(rule: String, extra: String) async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        try await receiver.control(#"{"rules":[\#(rule)]}"#)
        let clock = ManualClock()
        let harness = try Harness(try configuration(config(receiver, dir, extra)), clock: clock)
        try await clock.fastForwarding {
            try await harness.run { buffer in await buffer.send(positions(0..<100)) }
        }
        let accepted = receiver.accepted().filter { !$0.ids.isEmpty }
        #expect(accepted.last?.ids == positions(0..<100).map(\.id))
        #expect(harness.stats.value("http.retried") >= 1)
        #expect(harness.stats.value("queue.dead_lettered") == 0)
        // Every attempt of one batch carries the same Idempotency-Key.
        let keys = Set(receiver.requests().compactMap { $0.headers["idempotency-key"] })
        #expect(keys.count == 1)
    }

    @Test func aTemplatePayloadArrivesInShape() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let body = #","body":{"format":"template","template":{"vipId":"${VIP_ID}","list":"$positions"},"fields":{"date":{"from":"time","time_format":"yyyy-MM-dd HH:mm:ss","zone":"Asia/Shanghai"},"latitude":"lat","longitude":"lon"}},"success":{"json":{"path":"resultInteger","greater_than":0}}"#
        let harness = try Harness(try configuration(config(receiver, dir, body)), clock: ManualClock())
        try await harness.run { buffer in await buffer.send(positions(0..<2)) }
        let json = try #require(receiver.accepted().first?.json)
        #expect(json["vipId"] == .string("vip-42"))
        let list = try #require(json["list"]?.arrayValue)
        #expect(list.count == 2)
        #expect(list.first?.objectValue?.keys == ["date", "latitude", "longitude"])
        #expect(list.first?["date"] == .string("2024-05-01 18:00:00"))
    }

    @Test func aRestartResumesFromTheQueue() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        receiver.stop()
        // First run: the server is down; the shutdown deadline (a cancellation) leaves everything queued.
        let c = try configuration(config(receiver, dir))
        let clock = ManualClock()
        let first = try Harness(c, clock: clock)
        let task = Task { try await clock.fastForwarding { try await first.run { buffer in await buffer.send(positions(0..<120)) } } }
        #expect(await Poll.until(timeout: .seconds(30)) { first.stats.value("http.retried") >= 2 })
        task.cancel()
        _ = await task.result
        try receiver.start()
        defer { receiver.stop() }
        let second = try Harness(c, clock: ManualClock())
        try await second.run { _ in }
        #expect(receiver.accepted().flatMap(\.ids) == positions(0..<120).map(\.id))
    }
}

/// A sink input that always has the next position ready (one per call, so it never times
/// out), moving `clock` by `step` before each: a steady stream without pauses. `before(i)` runs
/// before the `i`th position is handed over.
final class SteadyStream: SinkInput {
    private let positions: [Position]
    private let clock: ManualClock
    private let step: Duration
    private let before: @Sendable (Int) async -> Void
    private let handed = Atomic<Int>(0)

    init(_ positions: [Position], clock: ManualClock, step: Duration, before: @escaping @Sendable (Int) async -> Void) {
        self.positions = positions
        self.clock = clock
        self.step = step
        self.before = before
    }

    func next(timeout: Duration?) async -> SinkEvent {
        let i = handed.add(1, ordering: .relaxed).oldValue
        guard i < positions.count else { return .end }
        await before(i)
        clock.advance(by: step)
        return .positions([positions[i]])
    }

    func acknowledge() {}
}
