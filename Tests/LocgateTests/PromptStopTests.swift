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
        let queue = dir.path + "/q.sqlite"
        let durable = #"{ "path": "\#(queue)" }"#
        let first = try HangingServerTests.oneFixPipeline(in: dir, name: "first.json", url: "http://127.0.0.1:\(port)/track",
                                                          shutdownTimeout: "10s", queue: durable)
        let (took, _) = try await interruptWhileARequestHangs(first, accepted: accepted)
        print("durable queue: SIGINT to exit took \(took) (shutdown_timeout 10 s)")
        // ≤ 1 s is the aim; the slack is for a loaded machine, still far below the 10 s deadline.
        #expect(took < .seconds(3))
        #expect(pending(queue) == 1, "the batch in flight stays queued")

        // The next start, against a server that answers: `run --drain` with a source that ends at
        // once (an empty file) delivers the queued batch and exits.
        let record = dir.appendingPathComponent("received.jsonl").path
        let receiver = try ScriptPeer(script: DrainTests.receiver, arguments: ["--record", record, "--port", "0"])
        defer { receiver.stop() }
        let empty = dir.appendingPathComponent("empty.nmea")
        try Data().write(to: empty)
        let second = try HangingServerTests.oneFixPipeline(in: dir, name: "second.json", url: "http://127.0.0.1:\(receiver.port)/track",
                                                           shutdownTimeout: "10s", queue: durable,
                                                           source: #"{ "type": "file", "path": "\#(empty.path)" }"#)
        let log = dir.appendingPathComponent("second.log").path
        let run = try LocgateBinary.launch([try LocgateBinary.path(), "run", second.path, "--drain", "60s"], stderr: log)
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        let stderr: @Sendable () -> String = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(await Poll.until(timeout: .seconds(60)) { !run.isRunning }, "\(stderr())")
        #expect(run.terminationStatus == 0, "\(stderr())")
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
        let config = try HangingServerTests.oneFixPipeline(in: dir, url: "http://127.0.0.1:\(port)/track", shutdownTimeout: "2s", queue: "null")
        let (took, _) = try await interruptWhileARequestHangs(config, accepted: accepted)
        print("memory queue: SIGINT to exit took \(took) (shutdown_timeout 2 s)")
        // Nothing would keep the batch: the sink holds on to it until the deadline.
        #expect(took >= .milliseconds(1900))
        #expect(took < .seconds(8))
    }
}
