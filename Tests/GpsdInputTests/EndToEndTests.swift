import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// The built `locgate` binary with a gpsd source and a file sink, against gpsfake.
@Suite(.timeLimit(.minutes(3)), .serialized, .enabled(if: Peers.gpsfakeAvailable, "needs Debian's gpsd and gpsd-clients"))
struct EndToEndTests {
    /// Times (ms) of the positions in a JSON Lines file, in file order.
    static func times(in file: URL) -> [Int64] {
        guard let data = try? Data(contentsOf: file) else { return [] }
        return data.split(separator: 0x0A).compactMap { line in
            guard let v = try? JSONValue.parse(Array(line)), let t = v["time"]?.stringValue else { return nil }
            return Timestamp(iso8601: t)?.milliseconds
        }
    }

    @Test func aRestartedGpsdIsRejoinedWithoutRestartingLocgate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locgate-gpsd-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = Peers.freePort()
        let output = directory.appendingPathComponent("out.jsonl")
        let config = """
            { "sources": { "gps": { "type": "gpsd", "port": \(port), "reconnect_max": "100ms", "stall_timeout": "5s" } },
              "sinks": { "out": { "type": "file", "inputs": ["gps"], "path": "\(output.path)", "mode": "truncate" } } }
            """
        let configFile = directory.appendingPathComponent("pipeline.json")
        let stderrFile = directory.appendingPathComponent("stderr.log")
        try Data(config.utf8).write(to: configFile)
        let locgate = try ChildProcess(
            try LocgateBinary.path(), ["run", configFile.path, "--log-level", "debug"],
            environment: ProcessInfo.processInfo.environment, stderr: stderrFile.path)

        let first = GpsdChk.epochs(chk: try TestSupport.chk("rst39.log"))
        let second = GpsdChk.epochs(chk: try TestSupport.chk("nmea-rtk.log"))
        let firstTimes = Set(first.map(\.time))
        let secondTimes = Set(second.map(\.time))

        // gpsd #1 serves part of one log and is killed mid-stream.
        let gpsd1 = try GpsFake(logs: ["rst39.log"], port: port)
        #expect(await Poll.until(timeout: .seconds(60)) { Self.times(in: output).filter(firstTimes.contains).count >= 10 })
        gpsd1.stop()
        let beforeRestart = Self.times(in: output).count
        // gpsd #2 on the same port with another log: locgate must find it by itself.
        let gpsd2 = try GpsFake(logs: ["nmea-rtk.log"], port: port)
        defer { gpsd2.stop() }
        #expect(await Poll.until(timeout: .seconds(60)) { Self.times(in: output).filter(secondTimes.contains).count >= second.count })
        gpsd2.stop()

        locgate.signal(SIGINT)
        let status = locgate.wait()
        let times = Self.times(in: output)
        let log = (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
        print("end to end: \(beforeRestart) positions before the restart, \(times.count) in all; exit \(status.map(String.init) ?? "none")")
        #expect(beforeRestart >= 10 && beforeRestart < first.count, "gpsd #1 should be killed mid-stream")
        #expect(times.filter(secondTimes.contains).count == second.count)
        #expect(Set(times).count == times.count)
        #expect(log.contains("reconnecting in"))
        #expect(log.components(separatedBy: "connected to gpsd at").count - 1 >= 2)
        #expect(status == 0)
    }
}
