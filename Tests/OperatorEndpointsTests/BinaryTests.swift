import Foundation
import GatewayTesting
import Testing

/// The API as `locgate` starts it.
@Suite struct BinaryTests {
    func pipeline(api: String, dir: String) -> String {
        """
        { "api": \(api),
          "sources": { "rx": { "type": "file", "path": "\(dir)/in.nmea" } },
          "sinks": { "out": { "type": "file", "inputs": ["rx"], "path": "\(dir)/out.jsonl" } } }
        """
    }

    func runBinary(_ arguments: [String], dir: String) async throws -> (status: Int32, stderr: String) {
        let p = try LocgateBinary.launch([try LocgateBinary.path()] + arguments, stderr: "\(dir)/stderr.log")
        #expect(await Poll.until(timeout: .seconds(30)) { !p.isRunning }, "locgate did not exit")
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        return (p.terminationStatus, (try? String(contentsOfFile: "\(dir)/stderr.log", encoding: .utf8)) ?? "")
    }

    @Test(.timeLimit(.minutes(1)))
    func validateRefusesANonLoopbackAddressWithoutAToken() async throws {
        let dir = try temporaryDirectory("validate")
        try NMEASamples.writeLog(epochs: 3, to: "\(dir)/in.nmea")
        try pipeline(api: #"{"listen": "0.0.0.0:9425"}"#, dir: dir).write(toFile: "\(dir)/open.json", atomically: true, encoding: .utf8)
        let refused = try await runBinary(["validate", "\(dir)/open.json"], dir: dir)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("api.token: required when listen is not a loopback address (0.0.0.0:9425)"), "\(refused.stderr)")
        try pipeline(api: #"{"listen": "0.0.0.0:9425", "token": "${API_TOKEN:-x}"}"#, dir: dir).write(toFile: "\(dir)/token.json", atomically: true, encoding: .utf8)
        #expect(try await runBinary(["validate", "\(dir)/token.json"], dir: dir).status == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func aTakenPortIsAClearStartupError() async throws {
        let dir = try temporaryDirectory("taken")
        try NMEASamples.writeLog(epochs: 3, to: "\(dir)/in.nmea")
        let squatter = LoopbackTCPServer { _ in [] }
        try squatter.start()
        defer { squatter.stop() }
        try pipeline(api: #"{"listen": "127.0.0.1:\#(squatter.port)"}"#, dir: dir).write(toFile: "\(dir)/p.json", atomically: true, encoding: .utf8)
        let run = try await runBinary(["run", "\(dir)/p.json"], dir: dir)
        #expect(run.status == 1)
        #expect(run.stderr.contains("api: cannot start the operator API: cannot listen on 127.0.0.1:\(squatter.port): Address already in use"), "\(run.stderr)")
        let written = (try? String(contentsOfFile: "\(dir)/out.jsonl", encoding: .utf8)) ?? ""
        #expect(written.isEmpty, "no position went through before the failure")
    }

    @Test(.timeLimit(.minutes(1)))
    func afterAReloadTheAPIServesTheComponentsNowRunning() async throws {
        let dir = try temporaryDirectory("reload")
        let peer = try nmeaServer()
        defer { peer.stop() }
        let port = LoopbackTCPServer.freePort()
        func config(extraSink: Bool) -> String {
            """
            { "settings": { "stats_interval": false },
              "api": { "listen": "127.0.0.1:\(port)" },
              "sources": { "gps": { "type": "tcp", "host": "127.0.0.1", "port": \(peer.port), "device": "boat-1" } },
              "sinks": { "out": { "type": "file", "inputs": ["gps"], "path": "\(dir)/out.jsonl" }\(extraSink ? #", "copy": { "type": "file", "inputs": ["gps"], "path": "\#(dir)/copy.jsonl" }"# : "") } }
            """
        }
        try config(extraSink: false).write(toFile: "\(dir)/p.json", atomically: true, encoding: .utf8)
        let p = try LocgateBinary.launch([try LocgateBinary.path(), "run", "\(dir)/p.json"], stderr: "\(dir)/stderr.log")
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        func metrics() -> String { (try? Curl.run(["http://127.0.0.1:\(port)/metrics"]))?.body ?? "" }
        #expect(await Poll.until { metrics().contains(#"component="sinks.out""#) })
        #expect(!metrics().contains(#"component="sinks.copy""#))
        try config(extraSink: true).write(toFile: "\(dir)/p.json", atomically: true, encoding: .utf8)
        kill(p.processIdentifier, SIGHUP)
        // The added sink's counters are served, and they move: it receives positions.
        #expect(await Poll.until(timeout: .seconds(20)) {
            metrics().split(separator: "\n").contains { $0.hasPrefix("locgate_component_emitted_positions_total{") && $0.contains(#"component="sinks.copy""#) && !$0.hasSuffix(" 0") }
        }, "\(metrics())")
        kill(p.processIdentifier, SIGTERM)
        #expect(await Poll.until { !p.isRunning })
    }

    @Test(.timeLimit(.minutes(1)))
    func runServesTheAPIWhileThePipelineRunsAndStopsAfter() async throws {
        let dir = try temporaryDirectory("serve")
        let peer = try nmeaServer()
        defer { peer.stop() }
        let port = LoopbackTCPServer.freePort()
        let json = """
        { "settings": { "stats_interval": false },
          "api": { "listen": "127.0.0.1:\(port)" },
          "sources": { "gps": { "type": "tcp", "host": "127.0.0.1", "port": \(peer.port), "device": "boat-1" } },
          "sinks": { "out": { "type": "file", "inputs": ["gps"], "path": "\(dir)/out.jsonl" } } }
        """
        try json.write(toFile: "\(dir)/p.json", atomically: true, encoding: .utf8)
        let p = try LocgateBinary.launch([try LocgateBinary.path(), "run", "\(dir)/p.json"], stderr: "\(dir)/stderr.log")
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        #expect(await Poll.until { (try? Curl.run(["http://127.0.0.1:\(port)/positions/latest"]))?.body.contains("boat-1") == true })
        kill(p.processIdentifier, SIGTERM)
        #expect(await Poll.until { !p.isRunning })
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(try Curl.run(["http://127.0.0.1:\(port)/health"]).status == 0, "the port is closed after the run")
        let log = try String(contentsOfFile: "\(dir)/stderr.log", encoding: .utf8)
        #expect(log.contains("info api: serving http://127.0.0.1:\(port) / /events /metrics /health /positions/latest"), "\(log)")
    }
}
