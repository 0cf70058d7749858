import PluginCatalog
import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
import Testing

/// Live reload with real components: a tcp NMEA source fed by a loopback server, file sinks,
/// a geofence, and an http sink with its SQLite queue talking to the test receiver.
@Suite struct ReloadTests {
    /// A pipeline file's components, loaded as `locgate run` loads them.
    func configuration(_ json: String, directory: String) throws -> PipelineConfiguration {
        try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry, baseDirectory: directory)
    }

    func temporaryDirectory() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locgate-reload-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A server that sends one RMC+GGA epoch every 5 ms: a source that streams while the test reloads.
    func streamingServer() throws -> LoopbackTCPServer {
        let server = LoopbackTCPServer(interval: .milliseconds(5)) { n in Array(NMEASamples.epoch(n).utf8) }
        try server.start()
        return server
    }

    /// The JSON Lines records of a file sink's output.
    func records(_ path: String) -> [JSONValue] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONValue.parse(string: String($0)) }
    }

    func ids(_ path: String) -> [String] { records(path).compactMap { $0["id"]?.stringValue } }

    /// Fix times in whole seconds, for checking that a sequence has no gap.
    func seconds(_ ids: [String]) -> [Int64] {
        ids.compactMap { $0.split(separator: "-").last.flatMap { Int64($0) }.map { $0 / 1000 } }
    }

    @Test(.timeLimit(.minutes(1)))
    func aFileSinkMovedToAnotherPathWhileStreamingGetsEveryPositionOnceAndTheSourceStaysConnected() async throws {
        let server = try streamingServer()
        defer { server.stop() }
        let dir = try temporaryDirectory()
        func json(_ file: String) -> String {
            """
            { "settings": { "stats_interval": false },
              "sources": { "rx": { "type": "tcp", "host": "127.0.0.1", "port": \(server.port) } },
              "sinks": { "out": { "type": "file", "inputs": ["rx"], "path": "\(file)", "fsync": true, "buffer": { "max_positions": 1 } } } }
            """
        }
        // A one-position buffer in front of a sink that syncs every write: the source is mostly
        // waiting for room in the old sink's buffer when the reload comes.
        let log = RecordingLogHandler(minimumLevel: .info)
        let pipeline = try Pipeline(configuration: configuration(json("a.jsonl"), directory: dir), logHandler: log)
        async let code = pipeline.run()
        #expect(await Poll.until { self.ids(dir + "/a.jsonl").count >= 50 })

        let outcome = await pipeline.reload(configuration: try configuration(json("b.jsonl"), directory: dir))
        #expect(outcome.status == .applied)
        #expect(outcome.restarted == ["sinks.out"])
        #expect(outcome.unchanged == 1)
        #expect(await Poll.until { self.ids(dir + "/b.jsonl").count >= 50 })
        pipeline.shutdown(reason: "test")
        #expect(await code == 0)

        let a = ids(dir + "/a.jsonl"), b = ids(dir + "/b.jsonl")
        let all = a + b
        #expect(Set(all).count == all.count, "a position was written twice")
        // A then B: the old file got everything before the swap, the new one everything after.
        let t = seconds(all)
        #expect(t == t.sorted())
        let gaps = zip(t, t.dropFirst()).filter { $1 - $0 != 1 }
        #expect(gaps.isEmpty, "positions lost between \(gaps)")
        #expect(server.connections == 1, "the source reconnected")
        #expect(!log.entries(level: .info, containing: "reloaded: restarted sinks.out, unchanged 1").isEmpty)
    }

    @Test(.timeLimit(.minutes(1)))
    func anUnchangedGeofenceKeepsItsStateAndAChangedOneStartsOver() async throws {
        let server = try streamingServer()
        defer { server.stop() }
        let dir = try temporaryDirectory()
        // A 5 km circle around the server's track: every position is inside.
        let fence = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"zone","radius":5000},"geometry":{"type":"Point","coordinates":[13.4,52.52]}}]}"#
        func json(file: String, border: Int) -> String {
            """
            { "settings": { "stats_interval": false },
              "sources": { "rx": { "type": "tcp", "host": "127.0.0.1", "port": \(server.port) } },
              "transforms": { "zone": { "type": "geofence", "inputs": ["rx"], "fences": \(fence), "events": ["enter"], "border_m": \(border) } },
              "sinks": { "out": { "type": "file", "inputs": ["zone"], "path": "\(file)" } } }
            """
        }
        @Sendable func enters() -> Int {
            (records(dir + "/a.jsonl") + records(dir + "/b.jsonl")).filter { $0["event"]?["type"]?.stringValue == "enter" }.count
        }
        let pipeline = try Pipeline(configuration: configuration(json(file: "a.jsonl", border: 0), directory: dir), logHandler: SilentLogHandler())
        async let code = pipeline.run()
        #expect(await Poll.until { enters() == 1 && self.ids(dir + "/a.jsonl").count >= 20 })

        // Only the sink changes: the geofence keeps knowing the device is inside.
        let kept = await pipeline.reload(configuration: try configuration(json(file: "b.jsonl", border: 0), directory: dir))
        #expect(kept.restarted == ["sinks.out"])
        #expect(await Poll.until { self.ids(dir + "/b.jsonl").count >= 50 })
        #expect(enters() == 1, "an unchanged geofence emitted a second enter")

        // The geofence changes: it is rebuilt, so the device enters again.
        let rebuilt = await pipeline.reload(configuration: try configuration(json(file: "b.jsonl", border: 1), directory: dir))
        #expect(rebuilt.restarted == ["transforms.zone"])
        #expect(await Poll.until { enters() == 2 })
        pipeline.shutdown(reason: "test")
        #expect(await code == 0)
        #expect(enters() == 2)
    }

    @Test(.timeLimit(.minutes(1)))
    func anUnchangedHTTPSinkKeepsItsQueueAndSendsNothingTwice() async throws {
        let server = try streamingServer()
        defer { server.stop() }
        let dir = try temporaryDirectory()
        // Every answer takes 1.5 s: a restarted sink would be cancelled mid-request after the
        // 300 ms drain deadline and its replacement would send the same rows again.
        let receiver = try HTTPReceiver(directory: dir, arguments: ["--delay", "1.5"])
        defer { receiver.stop() }
        func json(file: String) -> String {
            """
            { "settings": { "stats_interval": false, "shutdown_timeout": "300ms" },
              "sources": { "rx": { "type": "tcp", "host": "127.0.0.1", "port": \(server.port) } },
              "sinks": {
                "upload": { "type": "http", "inputs": ["rx"], "url": "http://127.0.0.1:\(receiver.port)/track",
                            "batch": { "max_positions": 20, "interval": "100ms" }, "queue": { "path": "upload.sqlite" } },
                "copy": { "type": "file", "inputs": ["rx"], "path": "\(file)" } } }
            """
        }
        let pipeline = try Pipeline(configuration: configuration(json(file: "a.jsonl"), directory: dir), logHandler: SilentLogHandler())
        async let code = pipeline.run()
        // Once the first request was answered the next one is on its way (the queue holds more
        // than a batch), so the reload comes while a request is in flight.
        #expect(await Poll.until { receiver.sentIDs().count >= 20 })
        let outcome = await pipeline.reload(configuration: try configuration(json(file: "b.jsonl"), directory: dir))
        #expect(outcome.restarted == ["sinks.copy"])
        #expect(await Poll.until(timeout: .seconds(30)) { receiver.sentIDs().count >= 3 * 20 })
        pipeline.shutdown(reason: "test")
        #expect(await code == 0)
        let sent = receiver.sentIDs()
        #expect(Set(sent).count == sent.count, "\(sent.count - Set(sent).count) position(s) were sent twice")
    }
}

/// `Tests/HTTPOutputTests/Support/receiver.py` on a free loopback port.
final class HTTPReceiver: Sendable {
    let record: String
    private let peer: ScriptPeer
    var port: Int { peer.port }

    init(directory: String, arguments: [String]) throws {
        record = directory + "/received.jsonl"
        let script = LocgateBinary.packageRoot.appendingPathComponent("Tests/HTTPOutputTests/Support/receiver.py").path
        peer = try ScriptPeer(script: script, arguments: ["--record", record, "--port", "0"] + arguments)
    }

    func stop() { peer.stop() }

    private func recorded() -> [JSONValue] {
        let text = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONValue.parse(string: String($0)) }
    }

    /// Position ids in every request body the receiver recorded, answered or not.
    func sentIDs() -> [String] {
        recorded().flatMap { r -> [String] in
            guard let body = r["body"]?.stringValue, let array = try? JSONValue.parse(string: body).arrayValue else { return [] }
            return array.compactMap { $0["id"]?.stringValue }
        }
    }
}
