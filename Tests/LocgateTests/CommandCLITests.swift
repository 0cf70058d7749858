import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// `locgate command send|list|show|cancel` against a running gateway, and a JT/T 808 terminal
/// that gets the command sent from the command line.
@Suite(.serialized, .timeLimit(.minutes(1))) struct CommandCLITests {
    @Test func aCommandSentFromTheCommandLineReachesTheTerminalAndItsStatusIsShown() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort(), apiPort = LoopbackTCPServer.freePort()
        let config = "\(dir)/pipeline.json"
        try Data("""
        {"settings":{"stats_interval":false,"state":{"path":"\(dir)/state.sqlite"}},
         "api":{"listen":"127.0.0.1:\(apiPort)","token":"secret"},
         "sources":{"jt":{"type":"jt808","listen":"127.0.0.1:\(port)","auth":"phone","devices":{"13912345678":"bus-12"}}},
         "sinks":{"out":{"type":"file","inputs":["jt"],"path":"\(dir)/out.jsonl"}}}
        """.utf8).write(to: URL(fileURLWithPath: config))
        let run = try LocgateBinary.launch([try LocgateBinary.path(), "run", config], stderr: "\(dir)/stderr.log")
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        let log: @Sendable () -> String = { (try? String(contentsOfFile: "\(dir)/stderr.log", encoding: .utf8)) ?? "" }
        #expect(await Poll.until { log().contains("serving http://127.0.0.1:\(apiPort)") }, "\(log())")
        func cli(_ args: [String]) throws -> Program.Result {
            try Program.run(try LocgateBinary.path(), ["command"] + args)
        }
        let sent = try cli(["send", config, "bus-12", "set_interval", "interval=20s", "id=int-1"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stdout.contains("status: queued") && sent.stdout.contains("parameters: interval=20s"), "\(sent.stdout)")
        let refused = try cli(["send", config, "bus-12", "launch"])
        #expect(refused.status == 1 && refused.stderr.contains("400: type: unknown command type"), "\(refused.stderr)")
        // The commands file sits beside the state store.
        #expect(FileManager.default.fileExists(atPath: "\(dir)/commands-state.sqlite"))

        var terminal = JT808TestTerminal(phone: "013912345678")
        let client = try LoopbackTCPClient(port: port)
        client.send(terminal.frame(0x0102, Array("013912345678".utf8)))
        #expect(JT808TestTerminal.read(client)?.id == 0x8001)
        let command = try #require(JT808TestTerminal.read(client))
        #expect(command.id == 0x8103 && command.body == [1, 0, 0, 0, 0x29, 4, 0, 0, 0, 20])
        client.send(terminal.frame(0x0001, JT808TestTerminal.word(command.serial) + [0x81, 0x03, 0]))
        #expect(await Poll.until { (try? cli(["show", config, "int-1"]))?.stdout.contains("status: done") == true })
        let list = try cli(["list", config, "bus-12"])
        #expect(list.stdout.contains("int-1") && list.stdout.contains("1 command(s)"), "\(list.stdout)")
        // A done command cannot be cancelled; a queued one can.
        #expect(try cli(["cancel", config, "int-1"]).status == 1)
        client.close()
        _ = try cli(["send", config, "bus-12", "reboot", "id=boot-1"])
        let cancelled = try cli(["cancel", config, "boot-1"])
        #expect(cancelled.status == 0 && cancelled.stdout.contains("status: cancelled"), "\(cancelled.stdout) \(cancelled.stderr)")
        kill(run.processIdentifier, SIGTERM)
        run.waitUntilExit()
        #expect(log().contains("command boot-1 (reboot) for bus-12 cancelled by token"))
    }
}

/// Commands through kill -9: a command is delivered whatever moment the gateway died at, and never
/// again once the terminal acknowledged it; an expired one and a cancelled one never.
@Suite(.serialized, .timeLimit(.minutes(2))) struct CommandCrashTests {
    final class Gateway {
        let dir: String, config: String, port: Int, apiPort: Int
        var process: Process?
        var runs = 0

        init() throws {
            dir = try makeTemporaryDirectory()
            config = "\(dir)/pipeline.json"
            port = LoopbackTCPServer.freePort()
            apiPort = LoopbackTCPServer.freePort()
            try Data("""
            {"settings":{"stats_interval":false,"shutdown_timeout":"1s","state":{"path":"\(dir)/state.sqlite"}},
             "api":{"listen":"127.0.0.1:\(apiPort)","token":"secret"},
             "sources":{"jt":{"type":"jt808","listen":"127.0.0.1:\(port)","auth":"phone","devices":{"13912345678":"bus-12"}}},
             "sinks":{"out":{"type":"file","inputs":["jt"],"path":"\(dir)/out.jsonl"}}}
            """.utf8).write(to: URL(fileURLWithPath: config))
        }

        func start() async throws {
            runs += 1
            let log = "\(dir)/stderr-\(runs).log"
            process = try LocgateBinary.launch([try LocgateBinary.path(), "run", config], stderr: log)
            let text: @Sendable () -> String = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
            #expect(await Poll.until { text().contains("serving http://") }, "\(text())")
        }

        func killNine() {
            guard let p = process else { return }
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }

        func cli(_ args: [String]) throws -> Program.Result {
            try Program.run(try LocgateBinary.path(), ["command"] + args)
        }

        /// Submits `set_interval` of `seconds` (the terminal tells the commands apart by it).
        func submit(_ id: String, seconds: Int, extra: [String] = []) throws {
            let r = try cli(["send", config, "bus-12", "set_interval", "interval=\(seconds)s", "id=\(id)"] + extra)
            #expect(r.status == 0, "\(r.stderr)")
        }

        func status(_ id: String) -> String? {
            guard let out = try? cli(["show", config, id]).stdout,
                  let line = out.split(separator: "\n").first(where: { $0.hasPrefix("status: ") }) else { return nil }
            return String(line.dropFirst(8))
        }

        deinit {
            killNine()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// A terminal that logs every 0x8103 it gets (its interval) and answers when told to.
    final class Terminal {
        var terminal = JT808TestTerminal(phone: "013912345678")
        var client: LoopbackTCPClient?
        var deliveries: [UInt32: Int] = [:]

        func connect(port: Int) async throws {
            #expect(await Poll.until { (try? LoopbackTCPClient(port: port)) != nil })
            let c = try LoopbackTCPClient(port: port)
            c.send(terminal.frame(0x0102, Array("013912345678".utf8)))
            #expect(JT808TestTerminal.read(c)?.id == 0x8001)
            client = c
        }

        /// The next command within `timeout` (counted), or nil.
        func nextCommand(timeout: Duration = .seconds(5)) -> (serial: UInt16, seconds: UInt32)? {
            guard let c = client else { return nil }
            while let frame = JT808TestTerminal.read(c, timeout: timeout) {
                guard frame.id == 0x8103 else { continue }
                let s = UInt32(frame.body[6]) << 24 | UInt32(frame.body[7]) << 16 | UInt32(frame.body[8]) << 8 | UInt32(frame.body[9])
                deliveries[s, default: 0] += 1
                return (frame.serial, s)
            }
            return nil
        }

        func acknowledge(_ serial: UInt16) {
            client?.send(terminal.frame(0x0001, JT808TestTerminal.word(serial) + [0x81, 0x03, 0]))
        }

        func disconnect() {
            client?.close()
            client = nil
        }
    }

    @Test func commandsSurviveKillNineAtEveryMomentAndAreNeverDeliveredTwiceOnceAcknowledged() async throws {
        let g = try Gateway()
        let t = Terminal()
        try await g.start()
        // Killed before the send: the terminal is offline.
        try g.submit("before", seconds: 11)
        // An expired one and a cancelled one: never sent.
        try g.submit("expired", seconds: 14, extra: ["ttl=1s"])
        try g.submit("cancelled", seconds: 15)
        #expect(try g.cli(["cancel", g.config, "cancelled"]).status == 0)
        g.killNine()
        try await Task.sleep(for: .seconds(1.2))  // the ttl of "expired" passes while the gateway is down
        try await g.start()
        try await t.connect(port: g.port)
        let first = try #require(t.nextCommand())
        #expect(first.seconds == 11)
        t.acknowledge(first.serial)
        #expect(await Poll.until { g.status("before") == "done" })

        // Killed after the send, before the answer: sent again on the next connection.
        try g.submit("unanswered", seconds: 12)
        let sent = try #require(t.nextCommand())
        #expect(sent.seconds == 12)
        g.killNine()
        t.disconnect()
        try await g.start()
        try await t.connect(port: g.port)
        let again = try #require(t.nextCommand())
        #expect(again.seconds == 12)
        t.acknowledge(again.serial)
        #expect(await Poll.until { g.status("unanswered") == "done" })

        // Killed after the answer: never again.
        try g.submit("answered", seconds: 13)
        let third = try #require(t.nextCommand())
        t.acknowledge(third.serial)
        #expect(await Poll.until { g.status("answered") == "done" })
        g.killNine()
        t.disconnect()
        try await g.start()
        try await t.connect(port: g.port)
        #expect(t.nextCommand(timeout: .seconds(2)) == nil, "nothing is sent again")

        #expect(t.deliveries == [11: 1, 12: 2, 13: 1], "\(t.deliveries)")
        #expect(g.status("expired") == "expired")
        #expect(g.status("cancelled") == "cancelled")
        #expect(g.runs == 4)
    }
}
