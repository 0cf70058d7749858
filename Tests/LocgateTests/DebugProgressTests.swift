import Foundation
import GatewayTesting
import Testing

/// `--log-level debug` shows each source's progress (as the stdout sink's README promises for
/// "nothing is printed"): a source that emits and one that does not are told apart.
@Suite struct DebugProgressTests {
    @Test(.timeLimit(.minutes(1)))
    func debugLevelLogsEachSourcesProgress() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try NMEASamples.writeLog(epochs: 8, to: "\(dir)/drive.nmea")
        try Data().write(to: URL(fileURLWithPath: "\(dir)/empty.nmea"))
        let config = #"""
        {"settings":{"stats_interval":false},
         "sources":{"drive":{"type":"file","path":"drive.nmea","rate":"realtime"},"silent":{"type":"file","path":"empty.nmea"}},
         "sinks":{"o":{"type":"file","inputs":["drive","silent"],"path":"out.jsonl"}}}
        """#
        try Data(config.utf8).write(to: URL(fileURLWithPath: "\(dir)/p.json"))
        let r = try LocgateBinary.run(["run", "\(dir)/p.json", "--log-level", "debug"])
        #expect(r.status == 0, "\(r.stderr)")
        // 8 epochs one second apart: 7 s of replay, one progress line at 5 s.
        let drive = r.stderr.split(separator: "\n").filter { $0.contains("debug sources.drive: progress: ") }
        #expect(drive.count == 1, "\(r.stderr)")
        #expect(drive.first?.contains("in the last 5s") == true)
        let count = drive.first.flatMap { Int($0.components(separatedBy: "progress: ").last?.prefix { $0.isNumber } ?? "") } ?? -1
        #expect((5...6).contains(count), "\(drive)")
        #expect(r.stderr.contains("debug sources.silent: progress: 0 position(s) emitted, 0 in the last 5s"), "\(r.stderr)")
    }
}
