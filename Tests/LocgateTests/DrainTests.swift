import Foundation
import GatewayTesting
import Testing

/// `run --drain`: a batch job that replays a log to a server waits until the queue is empty.
@Suite(.serialized)
struct DrainTests {
    static let receiver = LocgateBinary.packageRoot.appendingPathComponent("Tests/HTTPOutputTests/Support/receiver.py").path

    /// A 40-epoch log replayed at full speed to an http sink on `port`, with a durable queue and a
    /// 1 s shutdown timeout (without --drain the run would stop 1 s after the replay).
    static func pipeline(port: Int) throws -> (dir: String, config: String) {
        let dir = try makeTemporaryDirectory()
        try NMEASamples.writeLog(epochs: 40, to: "\(dir)/drive.nmea")
        let config = """
        {"settings":{"shutdown_timeout":"1s","stats_interval":false},
         "sources":{"r":{"type":"file","path":"drive.nmea"}},
         "sinks":{"u":{"type":"http","inputs":["r"],"url":"http://127.0.0.1:\(port)/track",
                       "batch":{"max_positions":15,"interval":"200ms"},"retry":{"initial":"200ms","max":"500ms"},
                       "connect_timeout":"1s","queue":{"path":"upload.sqlite"}}}}
        """
        try Data(config.utf8).write(to: URL(fileURLWithPath: "\(dir)/pipeline.json"))
        return (dir, "\(dir)/pipeline.json")
    }

    static func pendingRows(_ queue: String) -> String {
        let rows = (try? Program.run("/usr/bin/env", ["sqlite3", queue, "SELECT count(*) FROM pending"]))?.stdout ?? ""
        return rows.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(.timeLimit(.minutes(1)))
    func aDrainingRunWaitsForAServerThatComesBackLaterAndExitsZeroWithTheQueueEmpty() async throws {
        let port = LoopbackTCPServer.freePort()
        let (dir, config) = try Self.pipeline(port: port)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = "\(dir)/stderr.log"
        let run = try LocgateBinary.launch([try LocgateBinary.path(), "run", config, "--drain", "60s"], stderr: log)
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        let stderr: @Sendable () -> String = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(await Poll.until { stderr().contains("draining") }, "\(stderr())")
        // The server stays down for longer than shutdown_timeout: a run without --drain would have stopped.
        try await Task.sleep(for: .seconds(2))
        #expect(run.isRunning, "\(stderr())")
        let record = "\(dir)/requests.jsonl"
        let server = try ScriptPeer(script: Self.receiver, arguments: ["--record", record, "--port", String(port)])
        defer { server.stop() }
        #expect(await Poll.until(timeout: .seconds(30)) { !run.isRunning }, "\(stderr())")
        #expect(run.terminationStatus == 0, "\(stderr())")
        #expect(Self.pendingRows("\(dir)/upload.sqlite") == "0")
        #expect(!stderr().contains("stay queued"), "\(stderr())")
        var ids = Set<String>()
        for line in try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n") {
            let request = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            guard request?["status"] as? Int == 200, let body = request?["body"] as? String else { continue }
            let positions = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] ?? []
            for p in positions { if let id = p["id"] as? String { ids.insert(id) } }
        }
        #expect(ids.count == 40, "\(ids.count) distinct positions delivered")
    }

    @Test(.timeLimit(.minutes(1)))
    func aDrainThatTimesOutExitsThreeAndSaysHowManyRemainAndWhere() throws {
        let (dir, config) = try Self.pipeline(port: LoopbackTCPServer.freePort())
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try LocgateBinary.run(["run", config, "--drain", "1s"])
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("warning pipeline: drain timeout of 1s passed with 40 position(s) still queued in 1 sink(s)"), "\(r.stderr)")
        #expect(r.stderr.contains("40 position(s) stay queued in \(dir)/upload.sqlite for the next start"), "\(r.stderr)")
        #expect(Self.pendingRows("\(dir)/upload.sqlite") == "40")
    }

    @Test func aDrainTimeoutMustBeADuration() throws {
        let r = try LocgateBinary.run(["run", "--drain=soon", "x.json"])
        #expect(r.status == 2)
        #expect(r.stderr.contains(#"--drain expects a timeout such as "30s" or "10m", got "soon""#), "\(r.stderr)")
    }
}
