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
        try await cluster.start()
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"])
        // Published while locgate is not running.
        let publisher = try await cluster.connect()
        let total = 20_000
        let window = Locked<Int>(0)
        for i in 0..<total {
            while window.withLock({ $0 }) >= 500 { try await Task.sleep(for: .milliseconds(2)) }
            window.withLock { $0 += 1 }
            try publisher.publishAsync(subject: "locgate.positions.van-\(i % 7)", payload: positionJSON(i, device: "van-\(i % 7)"),
                                       messageID: "rx-\(i)", expectStream: "LOCGATE", ackTimeout: .seconds(10)) { _ in window.withLock { $0 -= 1 } }
        }
        #expect(await Poll.until(timeout: .seconds(60)) { (try? await cluster.count("LOCGATE")) == UInt64(total) })
        await publisher.close()

        let dir = NSTemporaryDirectory() + "locgate-nats-source-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let out = dir + "/out.jsonl"
        let servers = cluster.urls.map { "\"\($0)\"" }.joined(separator: ", ")
        let config = """
            { "settings": { "stats_interval": "1s" },
              "sources": { "bus": { "type": "nats", "servers": [\(servers)], "stream": "LOCGATE", "consumer": "agg",
                                    "batch": 20, "max_unacked": 100, "ack_wait": "2s" } },
              "sinks": { "out": { "type": "file", "inputs": ["bus"], "path": "\(out)" } } }
            """
        try config.write(toFile: dir + "/run.json", atomically: true, encoding: .utf8)

        // Three kill -9 mid-consumption, each after the file grew by about 1500 more positions
        // (its size is cheap to poll; a position is about 200 bytes).
        @Sendable func size() -> Int { ((try? FileManager.default.attributesOfItem(atPath: out))?[.size] as? Int) ?? 0 }
        for round in 1...3 {
            let p = try LocgateBinary.launch([binary, "run", dir + "/run.json"], stderr: dir + "/run\(round).log")
            let before = size()
            let grew = await Poll.until(timeout: .seconds(90), interval: .milliseconds(2)) { size() >= before + 300_000 }
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            #expect(grew)
            #expect(p.terminationReason == .uncaughtSignal)
        }
        #expect(idsInFile(out).count < total, "the kills came after everything was consumed; the test proves nothing")

        // The last run consumes the rest; the consumer ends with nothing pending.
        let last = try LocgateBinary.launch([binary, "run", dir + "/run.json"], stderr: dir + "/run-last.log")
        defer { if last.isRunning { kill(last.processIdentifier, SIGKILL); last.waitUntilExit() } }
        #expect(await Poll.until(timeout: .seconds(120)) { idsInFile(out).count == total })
        #expect(await Poll.until(timeout: .seconds(60)) {
            guard let info = try? await cluster.consumer("LOCGATE", "agg") else { return false }
            return info.numAckPending == 0 && info.numPending == 0
        })
        kill(last.processIdentifier, SIGTERM)
        last.waitUntilExit()
        #expect(last.terminationStatus == 0)
        let counts = idsInFile(out)
        #expect(Set(counts.keys) == Set((0..<total).map { "rx-\($0)" }))
        let duplicates = counts.values.reduce(0) { $0 + $1 - 1 }
        // Duplicates are allowed (at-least-once): written, then killed before the ack went out.
        // At most max_unacked (100) positions are out per run, so each kill repeats at most that many.
        #expect(duplicates <= 3 * 100, "kill -9 ×3: \(total) positions, \(duplicates) duplicates")
    }

    @Test(.timeLimit(.minutes(6)))
    func fleetExampleRunsAndPartitionsMatchOneAggregator() async throws {
        let binary = try LocgateBinary.path()
        let dir = NSTemporaryDirectory() + "locgate-fleet-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let script = LocgateBinary.packageRoot.appendingPathComponent("Docs/examples/fleet/fleet.sh").path
        let p = try LocgateBinary.launch(["/bin/bash", script, binary], stderr: dir + ".log", stdout: dir + ".out", environment: ["FLEET_EPOCHS": "400"])
        let ended = await Poll.until(timeout: .seconds(300), interval: .milliseconds(200)) { !p.isRunning }
        if !ended { kill(p.processIdentifier, SIGTERM); p.waitUntilExit() }
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
