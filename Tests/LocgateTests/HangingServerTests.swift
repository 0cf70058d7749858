import Foundation
import GatewayTesting
import Testing

/// A server that accepts the connection and never answers (a half-open mobile link): the http
/// sink must wait without spending CPU, and a signal must end the request at once with the
/// batch still queued (PromptStopTests: how soon, and the next start).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct HangingServerTests {
    /// CPU time (user + system) of a process, in clock ticks, from /proc.
    static func cpuTicks(_ pid: Int32) -> Int? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state(0) ... utime is field 14 of the file, index 11 here; stime 12.
        guard fields.count > 12, let u = Int(fields[11]), let s = Int(fields[12]) else { return nil }
        return u + s
    }

    /// Writes `dir/name`: a pipeline whose `rx` source sends one fix (an exec source that then
    /// stays silent, unless `source` gives another) to an http sink `up` at `url`, batches of one,
    /// a 60 s request timeout, the given `queue` JSON and `shutdown_timeout`.
    static func oneFixPipeline(in dir: URL, name: String = "p.json", url: String, shutdownTimeout: String,
                               queue: String, source: String? = nil) throws -> URL {
        let rx: String
        if let source {
            rx = source
        } else {
            let nmea = dir.appendingPathComponent("fix.nmea")
            try NMEASamples.epoch(0).write(to: nmea, atomically: true, encoding: .utf8)
            rx = #"{ "type": "exec", "command": ["sh", "-c", "cat '\#(nmea.path)'; exec sleep 600"] }"#
        }
        let config = dir.appendingPathComponent(name)
        try #"""
            { "settings": { "shutdown_timeout": "\#(shutdownTimeout)" },
              "sources": { "rx": \#(rx) },
              "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "\#(url)",
                                 "timeout": "60s", "batch": { "max_positions": 1, "interval": "100ms" },
                                 "queue": \#(queue) } } }
            """#.write(to: config, atomically: true, encoding: .utf8)
        return config
    }

    /// A loopback server that accepts, records each connection (a line in the returned file) and
    /// never answers; the caller kills it.
    static func startHangingServer(in dir: URL) throws -> (Process, port: Int, accepted: String) {
        let accepted = dir.appendingPathComponent("accepted").path
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-c", """
            import signal, socket, sys
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
            print(s.getsockname()[1], flush=True)
            held = []
            while True:
                c, _ = s.accept(); held.append(c)
                open(sys.argv[1], "a").write("x\\n")
            """, accepted]
        let out = Pipe()
        server.standardOutput = out
        try server.run()
        var line: [UInt8] = []
        while let b = try out.fileHandleForReading.read(upToCount: 1)?.first, b != 10 { line.append(b) }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            kill(server.processIdentifier, SIGKILL)
            throw CocoaError(.fileReadCorruptFile)
        }
        return (server, port, accepted)
    }

    @Test func aSilentServerCostsNoCPUAndTheDeadlineEndsTheRequestWithTheBatchQueued() async throws {
        let dir = try makeTemporaryDirectoryURL()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (server, port, accepted) = try HangingServerTests.startHangingServer(in: dir)
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }

        let config = try HangingServerTests.oneFixPipeline(in: dir, url: "http://127.0.0.1:\(port)/track", shutdownTimeout: "2s",
                                                           queue: #"{ "path": "\#(dir.path)/q.sqlite" }"#)
        let (p, _, err) = try LocgateBinary.start(["run", config.path])
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        #expect(await Poll.until(timeout: .seconds(30)) { FileManager.default.fileExists(atPath: accepted) })

        // While the request hangs: 3 s of wall time may cost at most 1% of a core (3 ticks of 10 ms).
        let before = try #require(HangingServerTests.cpuTicks(p.processIdentifier))
        try await Task.sleep(for: .seconds(3))  // the measurement window itself, not a wait for a condition
        let after = try #require(HangingServerTests.cpuTicks(p.processIdentifier))
        #expect(after - before <= 3, "\(after - before) ticks of CPU in 3 s while waiting on a silent server")

        kill(p.processIdentifier, SIGINT)
        // shutdown_timeout is 2 s; cancelling the request must end it at once after that.
        let exited = await Poll.until(timeout: .seconds(5)) { !p.isRunning }
        #expect(exited)
        if exited {
            // Its log, so a failure says why (an abort prints its reason there).
            let log = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(p.terminationStatus == 0, "\(log)")
        }
        let depth = Tmpfs.sh("test \"$(sqlite3 '\(dir.path)/q.sqlite' 'select count(*) from pending')\" -gt 0")
        #expect(depth == 0, "the batch in flight stays queued")
    }
}
