import Foundation
import GatewayCore
import GatewayRuntime
@testable import HTTPOutput
import DeliveryEngine
import GatewayTesting
import Testing

/// The sink against the real receiver script, in process.
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
        let harness = try Harness(try configuration(config(receiver, dir)))
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
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":1000,"max_bytes":2048,"interval":"1h"}"#)))
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
        let harness = try Harness(try configuration(config(receiver, nil, batch: #"{"max_positions":100,"interval":"200ms"}"#)))
        try await harness.run { buffer in
            await buffer.send(positions(0..<3))
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count == 1 })
            await buffer.send(positions(3..<5))
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count == 2 })
        }
        #expect(receiver.accepted().map { $0.ids.count } == [3, 2])
    }

    @Test func fixesArrivingDuringARequestWaitForTheNextInterval() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir, arguments: ["--delay", "0.5"])
        defer { receiver.stop() }
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":100,"interval":"1s"}"#)))
        try await harness.run { buffer in
            await buffer.send(positions(0..<3))
            // The interval flush goes at ~1 s and its request takes 0.5 s; one fix arrives while
            // it is in flight and one after: both wait for the next interval instead of going
            // out one request each.
            try await Task.sleep(for: .milliseconds(1200))
            await buffer.send(positions(3..<4))
            try await Task.sleep(for: .milliseconds(500))
            await buffer.send(positions(4..<5))
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count >= 2 })
        }
        #expect(receiver.accepted().map { $0.ids.count } == [3, 2])
    }

    @Test func aStreamWithoutPausesStillFlushesOnTheInterval() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":100000,"max_bytes":100000000,"interval":"300ms"}"#)))
        try await harness.run { buffer in
            // Back to back, so the sink's input never times out: only the interval check flushes.
            let start = ContinuousClock.now
            var i = 0
            while ContinuousClock.now - start < .milliseconds(1500) {
                await buffer.send(positions(i..<(i + 1)))
                i += 1
            }
            #expect(receiver.accepted().count >= 2)
        }
    }

    @Test func anOutageLosesNothingAndKeepsOrder() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        let harness = try Harness(try configuration(config(receiver, dir, batch: #"{"max_positions":100,"interval":"100ms"}"#)))
        try await harness.run { buffer in
            await buffer.send(positions(0..<150))
            #expect(await Poll.until(timeout: .seconds(30)) { receiver.accepted().count >= 1 })
            receiver.stop()
            for k in 0..<10 { await buffer.send(positions((150 + k * 100)..<(250 + k * 100))) }
            #expect(await Poll.until(timeout: .seconds(30)) { harness.stats.value("http.retried") >= 3 })
            try receiver.start()
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
        let harness = try Harness(try configuration(config(receiver, dir)))
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
        let harness = try Harness(try configuration(config(receiver, dir, extra)))
        try await harness.run { buffer in await buffer.send(positions(0..<100)) }
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
        let harness = try Harness(try configuration(config(receiver, dir, body)))
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
        let first = try Harness(c)
        let task = Task { try await first.run { buffer in await buffer.send(positions(0..<120)) } }
        #expect(await Poll.until(timeout: .seconds(30)) { first.stats.value("http.retried") >= 2 })
        task.cancel()
        _ = await task.result
        try receiver.start()
        defer { receiver.stop() }
        let second = try Harness(c)
        try await second.run { _ in }
        #expect(receiver.accepted().flatMap(\.ids) == positions(0..<120).map(\.id))
    }
}
