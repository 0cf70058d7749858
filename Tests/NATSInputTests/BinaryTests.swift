import Foundation
import GatewayCore
import GatewayTesting
import Locking
import NATSClient
import NATSTesting
import Testing

/// Position ids in a JSON Lines file, with how often each appears; a line cut by kill -9 is skipped
/// (its message was never acknowledged, so it comes again).
func idsInFile(_ path: String) -> [String: Int] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
    var counts: [String: Int] = [:]
    for line in text.split(separator: "\n") {
        guard let v = try? JSONValue.parse(string: String(line)), let id = v["id"]?.stringValue else { continue }
        counts[id, default: 0] += 1
    }
    return counts
}

@Suite(.serialized) struct BinaryTests {
    @Test(.timeLimit(.minutes(5)))
    func killNineWhileConsumingLosesNothingAndLeavesNothingPending() async throws {
        let binary = try LocgateBinary.path()
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        let dir = NSTemporaryDirectory() + "locgate-nats-source-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // On a failure (or the time limit) the report says which phase took the time and what
        // locgate, the consumer and the servers said; the directory is gone after the defers.
        let report = RunReport()
        var thrown: (any Error)?
        do {
            try await killNineRun(binary: binary, cluster: cluster, dir: dir, report: report)
        } catch {
            // A failed #require is recorded already and its phase noted; cancellation (the time
            // limit) is noted by the phase it cut short.
            if !(error is ExpectationFailedError || error is CancellationError) { report.lap("stopped: \(error)", ok: false) }
            thrown = error
        }
        if report.failed || Task.isCancelled {
            let runs = ["run1.log", "run2.log", "run3.log", "run-last.log"].map { dir + "/" + $0 }
            await report.record(details: {
                let info = try? await cluster.consumer("LOCGATE", "agg")
                let count = try? await cluster.count("LOCGATE")
                let ids = idsInFile(dir + "/out.jsonl")
                return [
                    info.map { "consumer agg: \($0.numPending) pending, \($0.numAckPending) delivered and not acknowledged, \($0.numRedelivered) redelivered, delivered to #\($0.deliveredStreamSequence), ack floor #\($0.ackFloorStreamSequence)" } ?? "consumer agg: no answer",
                    "stream LOCGATE: \(count.map { "\($0) messages" } ?? "no answer")",
                    "out.jsonl: \(ids.count) ids, \(ids.values.reduce(0) { $0 + $1 - 1 }) duplicates",
                ]
            }, logs: runs, serverLogs: cluster.nodes.map { "\(cluster.directory)/\($0.name).log" })
        }
        if let thrown { throw thrown }
    }

    /// The kill -9 test's phases; each notes in `report` how long it took and what it found, and a
    /// phase whose failure makes the rest pointless ends the test there (`#require`).
    ///
    /// Sized for a slow CI machine: the stream stores one message after the other, each with a
    /// few disk writes, so publishing is what a slow disk stretches. With every store write
    /// delayed 10 ms (strace fault injection on the nats-servers) 20,000 positions took 276 s of
    /// the 5 minutes and everything else 16 s; a little slower and the time limit cut the later
    /// phases, whose expectations then all failed at once (`Poll.until` returns at once when
    /// cancelled). 6,000 positions and a kill every 100 kB (about 600 positions) keep three kills
    /// mid-consumption: 88 s at 10 ms, 168 s at 20 ms.
    private func killNineRun(binary: String, cluster: NATSCluster, dir: String, report: RunReport) async throws {
        try await cluster.start()
        report.lap("cluster started (meta leader elected)")
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"])
        report.lap("stream created")
        // Published while locgate is not running; what was not stored (no PubAck in time, no
        // responders while the stream elected a leader) is sent again.
        let publisher = try await cluster.connect()
        let total = 6_000
        var unstored = Array(0..<total)
        for attempt in 1...5 where !unstored.isEmpty {
            let sent = unstored.count
            let answers: [String: Int]
            (unstored, answers) = try await publish(unstored, with: publisher, report: report)
            report.lap("publish attempt \(attempt): \(sent) sent, answers \(answers.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
        }
        if !unstored.isEmpty { report.lap("\(unstored.count) positions not stored after 5 attempts", ok: false) }
        try #require(unstored.isEmpty)
        let stored = await Poll.until(timeout: .seconds(60)) { (try? await cluster.count("LOCGATE")) == UInt64(total) }
        report.lap("stream count \(stored ? "reached \(total)" : "short of \(total)")", ok: stored)
        try #require(stored)
        await publisher.close()

        let out = dir + "/out.jsonl"
        let servers = cluster.urls.map { "\"\($0)\"" }.joined(separator: ", ")
        let config = """
            { "settings": { "stats_interval": "1s" },
              "sources": { "bus": { "type": "nats", "servers": [\(servers)], "stream": "LOCGATE", "consumer": "agg",
                                    "batch": 20, "max_unacked": 100, "ack_wait": "2s" } },
              "sinks": { "out": { "type": "file", "inputs": ["bus"], "path": "\(out)" } } }
            """
        try config.write(toFile: dir + "/run.json", atomically: true, encoding: .utf8)

        // Three kill -9 mid-consumption, each after the file grew by about 600 more positions
        // (its size is cheap to poll; a position is about 160 bytes).
        @Sendable func size() -> Int { ((try? FileManager.default.attributesOfItem(atPath: out))?[.size] as? Int) ?? 0 }
        for round in 1...3 {
            let p = try LocgateBinary.launch([binary, "run", dir + "/run.json"], stderr: dir + "/run\(round).log")
            let before = size()
            let grew = await Poll.until(timeout: .seconds(90), interval: .milliseconds(2)) { size() >= before + 100_000 }
            let exited = !p.isRunning
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            report.lap("round \(round): the file grew \(size() - before) bytes\(exited ? ", locgate had exited (status \(p.terminationStatus))" : "")",
                       ok: grew && p.terminationReason == .uncaughtSignal)
            try #require(grew)
            #expect(p.terminationReason == .uncaughtSignal)
        }
        let consumed = idsInFile(out).count
        report.lap("\(consumed) ids in the file after the kills", ok: consumed < total)
        try #require(consumed < total, "the kills came after everything was consumed; the test proves nothing")

        // The last run consumes the rest; the consumer ends with nothing pending.
        let last = try LocgateBinary.launch([binary, "run", dir + "/run.json"], stderr: dir + "/run-last.log")
        defer { if last.isRunning { kill(last.processIdentifier, SIGKILL); last.waitUntilExit() } }
        let all = await Poll.until(timeout: .seconds(120)) { idsInFile(out).count == total }
        report.lap("last run: \(idsInFile(out).count) ids in the file", ok: all)
        #expect(all)
        let settled = await Poll.until(timeout: .seconds(60)) {
            guard let info = try? await cluster.consumer("LOCGATE", "agg") else { return false }
            return info.numAckPending == 0 && info.numPending == 0
        }
        report.lap("consumer \(settled ? "has nothing pending" : "still has messages pending")", ok: settled)
        #expect(settled)
        kill(last.processIdentifier, SIGTERM)
        last.waitUntilExit()
        report.lap("last run stopped: \(last.terminationReason == .exit ? "status" : "signal") \(last.terminationStatus)", ok: last.terminationStatus == 0)
        #expect(last.terminationStatus == 0)
        let counts = idsInFile(out)
        let complete = Set(counts.keys) == Set((0..<total).map { "rx-\($0)" })
        let duplicates = counts.values.reduce(0) { $0 + $1 - 1 }
        report.lap("\(counts.count) ids, \(duplicates) duplicates", ok: complete && duplicates <= 3 * 100)
        #expect(complete)
        // Duplicates are allowed (at-least-once): written, then killed before the ack went out.
        // At most max_unacked (100) positions are out per run, so each kill repeats at most that many.
        #expect(duplicates <= 3 * 100, "kill -9 ×3: \(total) positions, \(duplicates) duplicates")
    }

    /// Publishes the positions `ids` (id `rx-i`, device `van-(i % 7)`) with up to 100 PubAcks
    /// outstanding and waits for every answer; returns those the stream did not store (timed out,
    /// no responders, refused, abandoned, or not taken by the client) to be sent again (a re-sent
    /// id that was stored after all is dropped by the stream's duplicate window), and how many
    /// answers of each kind came.
    private func publish(_ ids: [Int], with publisher: NATSConnection, report: RunReport) async throws -> (unstored: [Int], answers: [String: Int]) {
        // The stream stores one message after the other: with 500 outstanding and each store
        // slowed to 20 ms, most PubAcks came after the 10 s timeout (and were sent again).
        let window = UnacknowledgedWindow(limit: 100)
        let answers = Locked<[String: Int]>([:])
        let unstored = Locked<[Int]>([])
        @Sendable func answered(_ i: Int, _ result: NATSPublishResult) {
            let kind = Self.kind(result)
            answers.withLock { $0[kind, default: 0] += 1 }
            if kind != "stored" && kind != "duplicate" { unstored.withLock { $0.append(i) } }
            window.release(1)
        }
        func stopIfCancelled(_ phase: String) throws {
            guard Task.isCancelled else { return }
            report.lap("publishing \(phase): \(answers.withLock { $0.values.reduce(0, +) }) of \(ids.count) answered, \(window.outstanding) PubAcks outstanding", ok: false)
            throw CancellationError()
        }
        for i in ids {
            // Returns early (and the check ends the test) when the time limit cancels it.
            await window.acquire(1)
            try stopIfCancelled("sending")
            do {
                try publisher.publishAsync(subject: "locgate.positions.van-\(i % 7)", payload: positionJSON(i, device: "van-\(i % 7)"),
                                           messageID: "rx-\(i)", expectStream: "LOCGATE", ackTimeout: .seconds(10)) { answered(i, $0) }
            } catch {
                answered(i, .abandoned("\(error)"))
            }
        }
        // A whole window's worth goes only once nothing is outstanding: every answer came.
        await window.acquire(window.limit)
        try stopIfCancelled("waiting for the last answers")
        window.release(window.limit)
        return (unstored.withLock { $0 }.sorted(), answers.withLock { $0 })
    }

    /// A publish answer's kind, for counting them.
    private static func kind(_ result: NATSPublishResult) -> String {
        switch result {
        case .stored(_, _, let duplicate): duplicate ? "duplicate" : "stored"
        case .timedOut: "timed out"
        case .noResponders: "no responders"
        case .refused(let code, _): "refused \(code)"
        case .abandoned: "abandoned"
        }
    }

    @Test(.timeLimit(.minutes(6)))
    func fleetExampleRunsAndPartitionsMatchOneAggregator() async throws {
        let binary = try LocgateBinary.path()
        let dir = NSTemporaryDirectory() + "locgate-fleet-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let script = LocgateBinary.packageRoot.appendingPathComponent("Docs/examples/fleet/fleet.sh").path
        let p = try LocgateBinary.launch(["/bin/bash", script, binary], stderr: dir + ".log", stdout: dir + ".out", environment: ["FLEET_EPOCHS": "400"])
        let ended = await Poll.until(timeout: .seconds(300), interval: .milliseconds(200)) { !p.isRunning }
        if !ended {
            // The script's EXIT trap kills what it started; if it does not end (its trap stuck
            // waiting on a child), SIGKILL, so the test ends within its limit.
            kill(p.processIdentifier, SIGTERM)
            if await !Poll.until(timeout: .seconds(20), interval: .milliseconds(200), { !p.isRunning }) { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
        }
        let summary = (try? String(contentsOfFile: dir + ".out", encoding: .utf8)) ?? ""
        let log = (try? String(contentsOfFile: dir + ".log", encoding: .utf8)) ?? ""
        defer { try? FileManager.default.removeItem(atPath: dir + ".out"); try? FileManager.default.removeItem(atPath: dir + ".log") }
        #expect(ended)
        #expect(p.terminationStatus == 0, "\(summary)\n\(log)")
        #expect(summary.contains("positions 3200/3200 (reference 3200)"), "\(summary)")
        #expect(summary.contains("missing events 0, extra events 0"), "\(summary)")
        #expect(log.contains("kill -9 aggregator-1"))
        // Partition 3 moved to aggregator 0, which continued its devices from the Key-Value state.
        #expect(log.contains("moved partition 3"))
    }
}
