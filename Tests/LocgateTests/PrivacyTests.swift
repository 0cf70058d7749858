import Foundation
import GatewayTesting
import Testing

/// Location data is personal: files are owner-only, and secrets reach no output channel.
@Suite struct PrivacyTests {
    func mode(_ path: String) -> mode_t? {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o777 : nil
    }

    @Test(.timeLimit(.minutes(1))) func queueAndOutputFilesAreOwnerOnlyWhateverTheUmask() async throws {
        let dir = try makeTemporaryDirectoryURL()
        try NMEASamples.writeLog(epochs: 50, to: dir.path + "/track.nmea")
        let port = LoopbackTCPServer.freePort()
        // Nothing listens on the port: the queue keeps its rows (and its -wal and -shm) while the run lasts.
        let config = #"""
        { "settings": { "stats_interval": false, "shutdown_timeout": "1s" },
          "sources": { "rx": { "type": "file", "path": "track.nmea", "rate": "10x" } },
          "sinks": {
            "out": { "type": "file", "inputs": ["rx"], "path": "out.jsonl" },
            "up": { "type": "http", "inputs": ["rx"], "url": "http://127.0.0.1:\#(port)/t", "queue": { "path": "q.sqlite" } } } }
        """#
        try Data(config.utf8).write(to: dir.appendingPathComponent("p.json"))
        let binary = try LocgateBinary.path()
        // umask 000 would make every file world-readable if the mode were left to it.
        let p = try LocgateBinary.launch(["/bin/sh", "-c", "umask 000; exec \"$0\" run \"$1\"", binary, dir.path + "/p.json"],
                                         stderr: dir.path + "/stderr.log")
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        let files = ["out.jsonl", "q.sqlite", "q.sqlite-wal", "q.sqlite-shm"].map { dir.path + "/" + $0 }
        #expect(await Poll.until { files.allSatisfy { FileManager.default.fileExists(atPath: $0) } })
        for f in files { #expect(mode(f) == 0o600, "\(f)") }
        kill(p.processIdentifier, SIGTERM)
        #expect(await Poll.until { !p.isRunning })
        // The control: the same umask gives a file created without a mode of its own 0666.
        let control = dir.path + "/control"
        let shell = try LocgateBinary.launch(["/bin/sh", "-c", "umask 000; : > \"$0\"", control], stderr: dir.path + "/control.log")
        shell.waitUntilExit()
        #expect(mode(control) == 0o666)
    }

    @Test(.timeLimit(.minutes(1))) func secretsReachNoLogLineErrorStatusOrPluginListing() async throws {
        let secrets = ["pw-Sekrit-url", "pw-Sekrit-mqtt", "pw-Sekrit-nats", "tok-Sekrit-4711", "key-Sekrit-0815", "https//t-Sekrit-path"]
        let environment = ["UPLOAD_TOKEN": "tok-Sekrit-4711", "API_KEY": "key-Sekrit-0815", "UPLOAD_URL": "https//t-Sekrit-path"]
        let dir = try makeTemporaryDirectoryURL()
        try NMEASamples.writeLog(epochs: 20, to: dir.path + "/track.nmea")
        let port = LoopbackTCPServer.freePort()

        // 1. validate: each problem echoes the value it rejects.
        let broken = #"""
        { "sources": { "rx": { "type": "file", "path": "track.nmea" } },
          "sinks": {
            "a": { "type": "http", "inputs": ["rx"], "url": "ftp://gw:pw-Sekrit-url@127.0.0.1/x", "queue": null },
            "b": { "type": "http", "inputs": ["rx"], "url": "${secret:UPLOAD_URL}", "queue": null },
            "c": { "type": "mqtt", "inputs": ["rx"], "url": "mqtp://u:pw-Sekrit-mqtt@127.0.0.1:1883", "topic": "t", "queue": null },
            "d": { "type": "nats", "inputs": ["rx"], "servers": ["nats://u:pw-Sekrit-nats@127.0.0.1:99999"], "subject": "s", "queue": null } } }
        """#
        try Data(broken.utf8).write(to: dir.appendingPathComponent("broken.json"))
        let validate = try LocgateBinary.run(["validate", dir.path + "/broken.json"], environment: environment)
        #expect(validate.status == 2)
        // The echoes happened, masked.
        #expect(validate.stderr.contains("ftp://gw:***@127.0.0.1/x"), "\(validate.stderr)")
        #expect(validate.stderr.contains("sinks.b.url: expected an http:// or https:// URL, got \"***\""), "\(validate.stderr)")
        #expect(validate.stderr.contains("mqtp://u:***@127.0.0.1:1883"), "\(validate.stderr)")
        #expect(validate.stderr.contains("nats://u:***@127.0.0.1:99999"), "\(validate.stderr)")

        // 2. run: a sink whose peer is down, logging at trace, with the status going to a notify socket.
        let config = #"""
        { "settings": { "stats_interval": "200ms", "shutdown_timeout": "1s" },
          "sources": { "rx": { "type": "file", "path": "track.nmea", "rate": "10x" } },
          "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "http://gw:pw-Sekrit-url@127.0.0.1:\#(port)/t",
                             "auth": { "bearer": "${UPLOAD_TOKEN}" }, "headers": { "X-Api-Key": "${API_KEY}" },
                             "batch": { "interval": "100ms" }, "queue": null } } }
        """#
        try Data(config.utf8).write(to: dir.appendingPathComponent("p.json"))
        let socket = try NotifySocket()
        var env = environment
        env["NOTIFY_SOCKET"] = socket.path
        env["WATCHDOG_USEC"] = "400000"
        for format in ["text", "json"] {
            let run = try LocgateBinary.run(["--log-level", "trace", "--log-format", format, "run", dir.path + "/p.json"], environment: env)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stderr.contains("retry"), "\(run.stderr)")
            for s in secrets { #expect(!run.stderr.contains(s), "\(s) in \(run.stderr)") }
        }
        #expect(!socket.datagrams.isEmpty)
        for d in socket.datagrams { for s in secrets { #expect(!d.text.contains(s)) } }

        // 3. the plugin listing.
        let plugins = try LocgateBinary.run(["plugins"], environment: environment)
        #expect(plugins.status == 0)
        for s in secrets { #expect(!plugins.stdout.contains(s) && !plugins.stderr.contains(s)) }
    }
}
