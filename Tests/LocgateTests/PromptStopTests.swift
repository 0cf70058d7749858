import Foundation
import GatewayTesting
import Testing

/// Stop at once when it is safe: on SIGINT a sink whose queue is durable abandons the request in
/// flight (the batch stays queued, sent on the next start) instead of waiting for
/// `shutdown_timeout`; a `"queue": null` sink, which would lose it, waits for delivery.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct PromptStopTests {
    /// Runs the binary on `config` until the hanging server got the request, sends SIGINT, and
    /// returns how long the process took to exit, and its exit status.
    func interruptWhileARequestHangs(_ config: URL, accepted: String) async throws -> (Duration, Int32) {
        let (p, _, err) = try LocgateBinary.start(["run", config.path])
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        #expect(await Poll.until(timeout: .seconds(30)) { FileManager.default.fileExists(atPath: accepted) })
        let start = ContinuousClock.now
        kill(p.processIdentifier, SIGINT)
        let exited = await Poll.until(timeout: .seconds(30), interval: .milliseconds(5)) { !p.isRunning }
        let took = ContinuousClock.now - start
        #expect(exited)
        guard exited else { return (took, -1) }
        let log = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(p.terminationStatus == 0, "\(log)")
        return (took, p.terminationStatus)
    }

    func pending(_ queue: String) -> Int? {
        guard let r = try? Program.run("/usr/bin/env", ["sqlite3", queue, "select count(*) from pending"]) else { return nil }
        return Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func aSignalStopsADurableSinkAtOnceAndTheNextStartDeliversTheBatch() async throws {
        let dir = try makeTemporaryDirectoryURL()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, accepted) = try HangingServerTests.startHangingServer(in: dir)
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        let nmea = dir.appendingPathComponent("fix.nmea")
        try NMEASamples.epoch(0).write(to: nmea, atomically: true, encoding: .utf8)
        let queue = dir.path + "/q.sqlite"
        func config(_ url: String, command: String) -> String {
            #"""
            { "settings": { "shutdown_timeout": "10s" },
              "sources": { "rx": { "type": "exec", "command": ["sh", "-c", "\#(command)"] } },
              "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "\#(url)",
                                 "timeout": "60s", "batch": { "max_positions": 1, "interval": "100ms" },
                                 "queue": { "path": "\#(queue)" } } } }
            """#
        }
        let first = dir.appendingPathComponent("first.json")
        try config("http://127.0.0.1:\(port)/track", command: "cat '\(nmea.path)'; exec sleep 600").write(to: first, atomically: true, encoding: .utf8)
        let (took, _) = try await interruptWhileARequestHangs(first, accepted: accepted)
        print("durable queue: SIGINT to exit took \(took) (shutdown_timeout 10 s)")
        // ≤ 1 s is the aim; the slack is for a loaded machine, still far below the 10 s deadline.
        #expect(took < .seconds(3))
        #expect(pending(queue) == 1, "the batch in flight stays queued")

        // The next start, against a server that answers: `run --drain` delivers the batch.
        let receiverDir = dir.appendingPathComponent("rx")
        try FileManager.default.createDirectory(at: receiverDir, withIntermediateDirectories: true)
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let record = receiverDir.appendingPathComponent("received.jsonl").path
        receiver.arguments = ["python3", LocgateBinary.packageRoot.appendingPathComponent("Tests/HTTPOutputTests/Support/receiver.py").path,
                              "--record", record, "--port", "0"]
        let out = Pipe()
        receiver.standardOutput = out
        try receiver.run()
        defer { kill(receiver.processIdentifier, SIGKILL); receiver.waitUntilExit() }
        var line: [UInt8] = []
        while let b = try out.fileHandleForReading.read(upToCount: 1)?.first, b != 10 { line.append(b) }
        let receiverPort = try #require(Int(String(decoding: line, as: UTF8.self).dropFirst(5)))
        let second = dir.appendingPathComponent("second.json")
        try config("http://127.0.0.1:\(receiverPort)/track", command: "true").write(to: second, atomically: true, encoding: .utf8)
        let run = try LocgateBinary.run(["run", second.path, "--drain", "60s"])
        #expect(run.status == 0, "\(run.output)")
        let received = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
        #expect(received.split(separator: "\n").count == 1, "\(received)")
        #expect(received.contains(#""status": 200"#), "\(received)")
        #expect(pending(queue) == 0)
    }

    @Test func aSignalLetsAMemoryQueueSinkTryToDeliverUntilTheDeadline() async throws {
        let dir = try makeTemporaryDirectoryURL()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, accepted) = try HangingServerTests.startHangingServer(in: dir)
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        let nmea = dir.appendingPathComponent("fix.nmea")
        try NMEASamples.epoch(0).write(to: nmea, atomically: true, encoding: .utf8)
        let config = dir.appendingPathComponent("p.json")
        try #"""
            { "settings": { "shutdown_timeout": "2s" },
              "sources": { "rx": { "type": "exec", "command": ["sh", "-c", "cat '\#(nmea.path)'; exec sleep 600"] } },
              "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "http://127.0.0.1:\#(port)/track",
                                 "timeout": "60s", "batch": { "max_positions": 1, "interval": "100ms" }, "queue": null } } }
            """#.write(to: config, atomically: true, encoding: .utf8)
        let (took, _) = try await interruptWhileARequestHangs(config, accepted: accepted)
        print("memory queue: SIGINT to exit took \(took) (shutdown_timeout 2 s)")
        // Nothing would keep the batch: the sink holds on to it until the deadline.
        #expect(took >= .milliseconds(1900))
        #expect(took < .seconds(8))
    }
}
