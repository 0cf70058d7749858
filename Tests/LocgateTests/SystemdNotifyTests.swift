import Foundation
import GatewayTesting
import Testing

/// `locgate run` under a stand-in for systemd: the test listens on the `NOTIFY_SOCKET` datagram
/// socket and reads what the binary sends.
@Suite struct SystemdNotifyTests {
    /// The environment systemd gives a `Type=notify` unit with `WatchdogSec=1s`.
    func environment(_ socket: NotifySocket) -> [String: String] {
        ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "1000000"]
    }

    @Test(.timeLimit(.minutes(1))) func readyKeepalivesStatusAndStoppingReachTheNotifySocket() async throws {
        let socket = try NotifySocket()
        let dir = try makeTemporaryDirectoryURL()
        let binary = try LocgateBinary.path()
        // The demo: a bundled log replayed at 10x for about a minute.
        let p = try LocgateBinary.launch([binary, "run"], stderr: dir.path + "/stderr.log", environment: environment(socket))
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }

        #expect(await Poll.until { !socket.datagrams(containing: "READY=1").isEmpty })
        let ready = try #require(socket.datagrams(containing: "READY=1").first)
        // Six keepalives: five intervals, about 2.5 s at half of WATCHDOG_USEC.
        #expect(await Poll.until { socket.datagrams(containing: "WATCHDOG=1").count >= 6 })
        let keepalives = socket.datagrams(containing: "WATCHDOG=1").prefix(6)
        let first = try #require(keepalives.first), last = try #require(keepalives.last)
        let mean = (last.at - first.at) / 5
        // Sent more often than the watchdog fires (1 s), and not in a busy loop.
        #expect(mean > .milliseconds(250) && mean < .milliseconds(900), "mean keepalive interval \(mean)")
        #expect(first.at > ready.at)
        let status = try #require(keepalives.last?.value("STATUS"))
        #expect(status.hasPrefix("running: in="), "\(status)")
        #expect(status.contains("sources producing 1/1"), "\(status)")
        #expect(!socket.datagrams.contains { $0.value("STATUS")?.contains("no progress") == true })

        kill(p.processIdentifier, SIGTERM)
        #expect(await Poll.until { !socket.datagrams(containing: "STOPPING=1").isEmpty })
        #expect(await Poll.until { !p.isRunning })
        #expect(p.terminationStatus == 0)
    }

    @Test(.timeLimit(.minutes(1))) func aSinkStuckOnAFullPipeStopsTheKeepalives() async throws {
        let socket = try NotifySocket()
        let dir = try makeTemporaryDirectoryURL()
        try NMEASamples.writeLog(epochs: 3000, to: dir.path + "/track.nmea")
        try Data(#"""
        { "settings": { "stats_interval": false },
          "sources": { "rx": { "type": "file", "path": "track.nmea" } },
          "sinks": { "out": { "type": "stdout", "inputs": ["rx"], "format": "jsonl" } } }
        """#.utf8).write(to: dir.appendingPathComponent("p.json"))
        // Nobody reads stdout: once the pipe's 64 KiB are full the sink blocks in write(2) for good.
        let (p, _, err) = try LocgateBinary.start(["run", dir.path + "/p.json"], environment: environment(socket))
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }

        #expect(await Poll.until { socket.datagrams.contains { $0.value("STATUS")?.hasPrefix("no progress") == true } })
        let status = socket.datagrams.last { $0.value("STATUS")?.hasPrefix("no progress") == true }?.value("STATUS") ?? ""
        #expect(status.contains("wedged: sinks.out:"), "\(status)")
        let keepalives = socket.datagrams(containing: "WATCHDOG=1").count
        let beats = socket.datagrams.count
        // Three more heartbeats (1.5 s, past the 1 s watchdog systemd would enforce): no keepalive among them.
        #expect(await Poll.until { socket.datagrams.count >= beats + 3 })
        #expect(socket.datagrams(containing: "WATCHDOG=1").count == keepalives)

        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        let log = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("error pipeline: no progress, watchdog keepalives withheld: sinks.out:"), "\(log)")
    }

    @Test(.timeLimit(.minutes(1))) func aReloadIsAnnouncedWithReloadingThenReady() async throws {
        let socket = try NotifySocket()
        let dir = try makeTemporaryDirectoryURL()
        try NMEASamples.writeLog(epochs: 600, to: dir.path + "/track.nmea")
        try Data(#"{"sources":{"rx":{"type":"file","path":"track.nmea","rate":"realtime"}},"sinks":{"o":{"type":"file","inputs":["rx"],"path":"o.jsonl"}}}"#.utf8)
            .write(to: dir.appendingPathComponent("p.json"))
        let p = try LocgateBinary.launch([try LocgateBinary.path(), "run", dir.path + "/p.json"], stderr: dir.path + "/stderr.log", environment: environment(socket))
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        #expect(await Poll.until { !socket.datagrams(containing: "READY=1").isEmpty })
        kill(p.processIdentifier, SIGHUP)
        #expect(await Poll.until { socket.datagrams(containing: "READY=1").count == 2 })
        let reloading = try #require(socket.datagrams(containing: "RELOADING=1").first)
        #expect(reloading.value("MONOTONIC_USEC").flatMap { UInt64($0) } != nil)
        let readyAgain = try #require(socket.datagrams(containing: "READY=1").last)
        #expect(reloading.at < readyAgain.at)
        kill(p.processIdentifier, SIGTERM)
        #expect(await Poll.until { !p.isRunning })
    }

    @Test(.timeLimit(.minutes(1))) func aNotifySocketNobodyListensOnIsLoggedOnceAndTheRunGoesOn() throws {
        let dir = try makeTemporaryDirectoryURL()
        try NMEASamples.writeLog(epochs: 20, to: dir.path + "/track.nmea")
        try Data(#"{"sources":{"rx":{"type":"file","path":"track.nmea"}},"sinks":{"o":{"type":"file","inputs":["rx"],"path":"o.jsonl"}}}"#.utf8)
            .write(to: dir.appendingPathComponent("p.json"))
        let r = try LocgateBinary.run(["run", dir.path + "/p.json"], environment: ["NOTIFY_SOCKET": dir.path + "/nobody.sock"])
        #expect(r.status == 0, "\(r.stderr)")
        let failures = r.stderr.split(separator: "\n").filter { $0.contains("warning locgate.systemd: sd_notify(") }
        #expect(failures.count == 1, "\(r.stderr)")
        #expect(failures.first?.contains("sd_notify(READY=1) failed: No such file or directory") == true, "\(r.stderr)")
    }

    @Test(.timeLimit(.minutes(1))) func withoutNotifySocketNothingIsSentAndTheRunIsUnchanged() throws {
        let dir = try makeTemporaryDirectoryURL()
        try NMEASamples.writeLog(epochs: 20, to: dir.path + "/track.nmea")
        try Data(#"{"sources":{"rx":{"type":"file","path":"track.nmea"}},"sinks":{"o":{"type":"file","inputs":["rx"],"path":"o.jsonl"}}}"#.utf8)
            .write(to: dir.appendingPathComponent("p.json"))
        // WATCHDOG_USEC alone (a stray variable) must not start anything either.
        let r = try LocgateBinary.run(["run", dir.path + "/p.json"], environment: ["WATCHDOG_USEC": "1000000"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("keepalive"))
        #expect(try String(contentsOf: dir.appendingPathComponent("o.jsonl"), encoding: .utf8).split(separator: "\n").count == 20)
    }
}
