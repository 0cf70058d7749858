import Foundation
import GatewayTesting
import Testing

/// What a service manager and an operator see of `locgate`: log formats, file modes, secrets, usage.
@Suite struct ServiceOutputTests {
    /// A pipeline that logs at every level the tests need: info lines, and a warning for a source
    /// that feeds nothing.
    func writeLoggingPipeline(in dir: URL) throws -> String {
        try NMEASamples.writeLog(epochs: 5, to: dir.path + "/track.nmea")
        let config = #"""
        { "settings": { "stats_interval": false },
          "sources": { "rx": { "type": "file", "path": "track.nmea" }, "idle": { "type": "file", "path": "track.nmea" } },
          "sinks": { "o": { "type": "file", "inputs": ["rx"], "path": "o.jsonl" } } }
        """#
        try Data(config.utf8).write(to: dir.appendingPathComponent("p.json"))
        return dir.path + "/p.json"
    }

    /// Runs the binary to its end with stderr on the file at `stderr` (which must exist: its inode is the test's handle).
    func run(_ arguments: [String], stderr: String, environment: [String: String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try LocgateBinary.path())
        p.arguments = arguments
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderr))
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }

    func lines(_ path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    @Test(.timeLimit(.minutes(1))) func underTheJournalLinesCarrySyslogPrioritiesAndNoTime() throws {
        let dir = try makeTemporaryDirectoryURL()
        let config = try writeLoggingPipeline(in: dir)
        let stderr = dir.path + "/stderr.log"
        _ = FileManager.default.createFile(atPath: stderr, contents: nil)
        var st = stat()
        #expect(stat(stderr, &st) == 0)
        // systemd sets JOURNAL_STREAM to the device and inode of the stream it connected to stderr.
        let journal = ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"]
        #expect(try run(["run", config], stderr: stderr, environment: journal) == 0)
        let log = try lines(stderr)
        #expect(log.contains("<4>warning sources.idle: feeds nothing: no transform or sink lists it in inputs"), "\(log)")
        #expect(log.contains { $0.hasPrefix("<6>info pipeline: starting") }, "\(log)")
        #expect(!log.isEmpty && log.allSatisfy { $0.hasPrefix("<") && !$0.contains("Z info") && !$0.contains("Z warning") }, "\(log)")

        // A JOURNAL_STREAM inherited by a process whose stderr goes elsewhere keeps plain text.
        let other = dir.path + "/other.log"
        _ = FileManager.default.createFile(atPath: other, contents: nil)
        #expect(try run(["run", config], stderr: other, environment: journal) == 0)
        let plain = try lines(other)
        #expect(plain.contains { $0.hasSuffix("Z warning sources.idle: feeds nothing: no transform or sink lists it in inputs") }, "\(plain)")
        #expect(!plain.contains { $0.hasPrefix("<") })
    }

    @Test(.timeLimit(.minutes(1))) func jsonLogsAreOneObjectPerLine() throws {
        let dir = try makeTemporaryDirectoryURL()
        let config = try writeLoggingPipeline(in: dir)
        let r = try LocgateBinary.run(["--log-format", "json", "run", config])
        #expect(r.status == 0, "\(r.stderr)")
        let objects = r.stderr.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: String]
        }
        #expect(objects.count == r.stderr.split(separator: "\n").count && objects.count >= 3, "\(r.stderr)")
        #expect(objects.allSatisfy { Set($0.keys) == ["time", "level", "label", "message"] && $0["time"]?.hasSuffix("Z") == true })
        #expect(objects.contains { $0["level"] == "warning" && $0["label"] == "sources.idle" && $0["message"]?.hasPrefix("feeds nothing") == true })

        let bad = try LocgateBinary.run(["--log-format", "yaml", "run", config])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--log-format expects text or json"))
    }

    @Test func theBareCommandPrintsUsageAndExitsTwo() throws {
        let r = try LocgateBinary.run([])
        #expect(r.status == 2)
        #expect(r.stderr.contains("Usage:\n  locgate run [CONFIG]"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        // Asking for help is not an error.
        let help = try LocgateBinary.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("Usage:"))
    }
}
