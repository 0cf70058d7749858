import Foundation
import GatewayTesting
import Testing

/// Per-device state across a crash (issue 30): a phone posting OsmAnd fixes, locgate killed -9
/// while the phone is inside a fence, restarted on the same state store.
@Suite struct DeviceStateTests {
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        var value: Int { lock.withLock { n } }
        func increment() { lock.withLock { n += 1 } }
    }

    /// One OsmAnd request on a new connection; true when it was answered 200 (after commit).
    static func post(port: Int, time: Int, latitude: Double, longitude: Double) -> Bool {
        guard let client = try? LoopbackTCPClient(port: port) else { return false }
        let query = "id=car&lat=\(latitude)&lon=\(longitude)&timestamp=\(time)"
        guard client.send("GET /?\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n") else { return false }
        var answer: [UInt8] = []
        while let chunk = client.readSome(timeout: .seconds(10)), !chunk.isEmpty {
            answer += chunk
            if answer.count >= 12 { break }
        }
        return String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200")
    }

    static func lines(_ path: String) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    static func eventTypes(_ path: String) -> [String] {
        lines(path).compactMap { ($0["event"] as? [String: Any])?["type"] as? String }
    }

    @Test(.timeLimit(.minutes(1)), arguments: [true, false])
    func aCrashInsideAFenceNeitherEntersAgainNorLosesTheExit(stateKept: Bool) async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort()
        let state = stateKept ? #"{"path":"state.sqlite"}"# : "null"
        try Data("""
        {"settings":{"stats_interval":false,"shutdown_timeout":"1s","state":\(state)},
         "sources":{"phone":{"type":"http_server","format":"osmand","listen":"127.0.0.1:\(port)","unknown_devices":"accept"}},
         "transforms":{
           "park":{"type":"geofence","inputs":["phone"],"events":["enter","exit"],
                   "fences":{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"park","radius":500},
                             "geometry":{"type":"Point","coordinates":[120.0,30.0]}}]}},
           "moved":{"type":"distance_filter","inputs":["phone"],"min_distance_m":10}},
         "sinks":{"events":{"type":"file","inputs":["park"],"path":"events.jsonl"},
                  "passed":{"type":"file","inputs":["moved"],"path":"moved.jsonl"}}}
        """.utf8).write(to: URL(fileURLWithPath: "\(dir)/pipeline.json"))
        // One log per run (launching truncates it); `stderr()` reads the current run's.
        let runs = Counter()
        let stderr: @Sendable () -> String = { (try? String(contentsOfFile: "\(dir)/stderr-\(runs.value).log", encoding: .utf8)) ?? "" }
        func start() async throws -> Process {
            runs.increment()
            let run = try LocgateBinary.launch([try LocgateBinary.path(), "run", "\(dir)/pipeline.json"], stderr: "\(dir)/stderr-\(runs.value).log")
            #expect(await Poll.until { !run.isRunning || stderr().contains("listening") }, "\(stderr())")
            try #require(run.isRunning, "\(stderr())")
            return run
        }
        let t0 = 1_790_000_000
        var run = try await start()
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        // Outside, then inside (enter), then 1 m on: dropped by the distance filter.
        #expect(Self.post(port: port, time: t0, latitude: 30.01, longitude: 120.0))
        #expect(Self.post(port: port, time: t0 + 1, latitude: 30.0, longitude: 120.0))
        #expect(Self.post(port: port, time: t0 + 2, latitude: 30.00001, longitude: 120.0))
        kill(run.processIdentifier, SIGKILL)
        run.waitUntilExit()

        run = try await start()
        // Still inside, 2 m from the last fix passed before the crash; then out of the park.
        #expect(Self.post(port: port, time: t0 + 3, latitude: 30.00002, longitude: 120.0))
        #expect(Self.post(port: port, time: t0 + 4, latitude: 30.01, longitude: 120.0))
        kill(run.processIdentifier, SIGTERM)
        run.waitUntilExit()

        let events = Self.eventTypes("\(dir)/events.jsonl")
        let moved = Self.lines("\(dir)/moved.jsonl").compactMap { $0["time"] as? String }
        if stateKept {
            #expect(events == ["enter", "exit"], "\(stderr())")
            #expect(moved.count == 3, "the first, the fix entering, the fix leaving: \(moved)")
            #expect(stderr().contains("transforms.park: restored the state of 1 device(s)"), "\(stderr())")
        } else {
            // What every gateway without saved state does: a second enter, a fix that did not move passed.
            #expect(events == ["enter", "enter", "exit"])
            #expect(moved.count == 4, "\(moved)")
        }
    }
}
