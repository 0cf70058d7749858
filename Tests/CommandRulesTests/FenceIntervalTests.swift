import CommandRules
import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
import PluginCatalog
import Testing

/// The recipe locgate was born for, end to end: a JT/T 808 tracker drives into a park and is told
/// to report every 20 s, drives out and is told every 2 minutes; driving along the border sends
/// nothing more (the geofence's hysteresis, and the rule's shadow of what the tracker confirmed).
@Suite(.timeLimit(.minutes(1))) struct FenceIntervalTests {
    /// A square park of about 1.1 km around 22.54 N, 114.06 E.
    static let fences = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"park"},"geometry":{"type":"Polygon","coordinates":[[[114.055,22.535],[114.065,22.535],[114.065,22.545],[114.055,22.545],[114.055,22.535]]]}}]}"#

    static func pipeline(port: Int, dir: String) -> String {
        """
        { "settings": { "stats_interval": false, "commands": { "path": "\(dir)/commands.sqlite" } },
          "sources": { "trk": { "type": "jt808", "listen": "127.0.0.1:\(port)", "auth": "phone", "devices": { "13912345678": "bus-12" } } },
          "transforms": { "fence": { "type": "geofence", "inputs": ["trk"], "fences": \(fences), "events": ["enter", "exit"], "border_m": 30 } },
          "sinks": { "interval": { "type": "commands", "inputs": ["fence"], "rules": [
                        { "on": "enter", "fence": "park", "command": { "type": "set_interval", "interval": "20s" } },
                        { "on": "exit", "fence": "park", "command": { "type": "set_interval", "interval": "120s" } } ] },
                     "out": { "type": "file", "inputs": ["fence"], "path": "\(dir)/out.jsonl" } } }
        """
    }

    @Test func aTrackerEnteringAndLeavingTheParkGetsOneIntervalEachAndJitterNothing() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort()
        let configuration = try PipelineConfiguration.load(json: Array(Self.pipeline(port: port, dir: dir).utf8), registry: BuiltinPlugins.registry)
        let pipeline = try Pipeline(configuration: configuration, logHandler: SilentLogHandler())
        let run = Task { await pipeline.run() }
        defer { pipeline.shutdown(reason: "test done") }
        #expect(await Poll.until { (try? LoopbackTCPClient(port: port)) != nil })
        var terminal = JT808TestTerminal(phone: "013912345678")
        let client = try LoopbackTCPClient(port: port)
        client.send(terminal.frame(0x0102, Array("013912345678".utf8)))
        #expect(JT808TestTerminal.read(client)?.body.last == 0)

        var second = 0
        var intervals: [UInt32] = []
        /// Sends a fix (latitude north of the park's south edge, in metres) and reads what comes:
        /// the fix's answer, and any 0x8103, which it answers as done.
        func drive(_ metresNorth: Double) {
            second += 10
            let lat = 22.535 + metresNorth / 111_320
            // The terminal's clock is Beijing time: 2026-12-05 09:30 plus 10 s a fix.
            let c = Timestamp(milliseconds: Timestamp(year: 2026, month: 12, day: 5, hour: 9, minute: 30).milliseconds + Int64(second) * 1000).components
            let bcd = [c.year % 100, c.month, c.day, c.hour, c.minute, c.second].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined()
            client.send(terminal.frame(0x0200, JT808TestTerminal.location(lat: lat, lon: 114.06, bcd: bcd)))
            let fix = JT808TestTerminal.word(terminal.serial)
            while let frame = JT808TestTerminal.read(client, timeout: .seconds(5)) {
                take(frame)
                if frame.id == 0x8001 && frame.body.prefix(2) == fix[...] && frame.body[2...3] == [0x02, 0x00] { break }
            }
        }
        func take(_ frame: (id: UInt16, serial: UInt16, body: [UInt8])) {
            guard frame.id == 0x8103 else { return }
            intervals.append(UInt32(frame.body[6]) << 24 | UInt32(frame.body[7]) << 16 | UInt32(frame.body[8]) << 8 | UInt32(frame.body[9]))
            client.send(terminal.frame(0x0001, JT808TestTerminal.word(frame.serial) + [0x81, 0x03, 0]))
        }
        for north in [-500.0, -300, -100] { drive(north) }          // outside
        for north in [200.0, 400, 600] { drive(north) }             // inside: enter
        // Back and forth across the south edge within the 30 m border: no evidence either way.
        for north in [20.0, -20, 25, -15, 10, -25, 150] { drive(north) }
        for north in [-200.0, -400] { drive(north) }                // outside: exit
        for north in [-10.0, 15, -20, 20, -300] { drive(north) }    // jitter again
        for north in [300.0] { drive(north) }                       // back inside: enter
        for north in [310.0, 320] { drive(north) }
        // The last command may go out after the last fix's answer: it is awaited, and then
        // nothing more may come.
        while intervals.count < 3, let frame = JT808TestTerminal.read(client, timeout: .seconds(5)) { take(frame) }
        while let frame = JT808TestTerminal.read(client, timeout: .milliseconds(300)) { take(frame) }
        #expect(intervals == [20, 120, 20], "\(intervals)")
        pipeline.shutdown(reason: "test done")
        _ = await run.value
    }
}
