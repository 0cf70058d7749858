import Foundation
import GatewayTesting
import Testing

/// A `lua` transform's per-device state across a crash: kept in the state store once the device's
/// positions are handled, given back to the script after a restart.
@Suite struct LuaScriptStateTests {
    @Test(.timeLimit(.minutes(1)))
    func aScriptsStateSurvivesAKill() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort()
        try """
        function process(p, state)
          state.count = (state.count or 0) + 1
          p.attributes.count = state.count
          return p
        end
        """.write(toFile: "\(dir)/count.lua", atomically: true, encoding: .utf8)
        try Data("""
        {"settings":{"stats_interval":false,"shutdown_timeout":"1s","state":{"path":"state.sqlite"}},
         "sources":{"phone":{"type":"http_server","format":"osmand","listen":"127.0.0.1:\(port)","unknown_devices":"accept"}},
         "transforms":{"count":{"type":"lua","inputs":["phone"],"script":"count.lua"}},
         "sinks":{"out":{"type":"file","inputs":["count"],"path":"out.jsonl"}}}
        """.utf8).write(to: URL(fileURLWithPath: "\(dir)/pipeline.json"))
        func start(_ run: Int) async throws -> Process {
            let log = "\(dir)/stderr-\(run).log"
            let process = try LocgateBinary.launch([try LocgateBinary.path(), "run", "\(dir)/pipeline.json"], stderr: log)
            #expect(await Poll.until { (try? String(contentsOfFile: log, encoding: .utf8))?.contains("listening") == true })
            return process
        }
        let t0 = 1_790_000_000
        var run = try await start(1)
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        for k in 0..<3 { #expect(DeviceStateTests.post(port: port, time: t0 + k, latitude: 30 + Double(k) * 0.001, longitude: 120)) }
        kill(run.processIdentifier, SIGKILL)
        run.waitUntilExit()
        run = try await start(2)
        for k in 3..<5 { #expect(DeviceStateTests.post(port: port, time: t0 + k, latitude: 30 + Double(k) * 0.001, longitude: 120)) }
        kill(run.processIdentifier, SIGTERM)
        run.waitUntilExit()
        let counts = DeviceStateTests.lines("\(dir)/out.jsonl").compactMap { ($0["attributes"] as? [String: Any])?["count"] as? String }
        #expect(counts == ["1", "2", "3", "4", "5"], "the count went on after the kill")
    }
}
