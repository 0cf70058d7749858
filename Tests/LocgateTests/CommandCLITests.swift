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
