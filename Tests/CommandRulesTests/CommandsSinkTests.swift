import CommandRules
import DeviceCommands
import GatewayCore
import GatewayTesting
import Locking
import Testing

typealias Harness = SinkHarness<CommandsSinkPlugin>

/// A connection that takes whatever the board sends.
final class Link: CommandLink, Sendable {
    let sent = Locked<[DeviceCommand]>([])
    func send(_ command: DeviceCommand) { sent.withLock { $0.append(command) } }
    func withdraw(_ id: String) -> Bool { false }
}

@Suite(.timeLimit(.minutes(1))) struct CommandsSinkTests {
    static let rules = #"{ "rules": [ { "on": "enter", "fence": "park", "command": { "type": "set_interval", "interval": "20s" } }, { "on": "exit", "fence": "Park gate", "command": { "type": "set_interval", "interval": "2m" } } ] }"#

    static func event(_ kind: PositionEvent.Kind, fence: String = "park", name: String = "Park gate", n: Int) -> Position {
        Position(time: Timestamp(milliseconds: Int64(n) * 1000), source: "trk", device: "bus-12", id: "p\(n)",
                 event: PositionEvent(kind: kind, fenceId: fence, fenceName: name))
    }

    @Test func ruleCommandsAreNeverRepeatedAndAStaleOneIsReplaced() async throws {
        let board = try CommandBoard(store: MemoryCommandStore(), clock: ManualClock(), logger: Logger(label: "c", handler: SilentLogHandler()))
        defer { board.close() }
        board.register(source: "trk", types: Set(CommandType.allCases)) { _ in }
        board.knows(devices: ["bus-12"], source: "trk")
        let h = try Harness(Self.rules, id: "interval", commands: board)
        let sink = h.start()
        // enter (submitted), enter again (the same waits: skipped), an event of another fence (no rule).
        #expect(await sink.send([Self.event(.enter, n: 1), Self.event(.enter, n: 2), Self.event(.enter, fence: "depot", name: "Depot", n: 3)]))
        #expect(board.commands(device: "bus-12").map { $0.parameters["interval"] } == ["20s"])
        #expect(h.stats.value("commands.submitted") == 1 && h.stats.value("commands.skipped_pending") == 1)
        // exit before the enter's command went: it is cancelled, the exit's replaces it (matched by the fence's name).
        #expect(await sink.send([Self.event(.exit, n: 4)]))
        let after = board.commands(device: "bus-12")
        #expect(after.map(\.status) == [.queued, .cancelled])
        #expect(after.first?.parameters["interval"] == "2m" && after.first?.submittedBy == "interval")
        #expect(h.stats.value("commands.superseded") == 1)
        // The tracker takes it and confirms: the same decision again submits nothing.
        let link = Link()
        board.connected("bus-12", source: "trk", link: link)
        #expect(await Poll.until { link.sent.withLock { $0.count } == 1 })
        board.answered(try #require(after.first?.id), outcome: .done("success"))
        #expect(await Poll.until { board.command(after.first!.id)?.status == .done })
        #expect(await sink.send([Self.event(.exit, n: 5)]))
        #expect(h.stats.value("commands.skipped_confirmed") == 1)
        #expect(board.commands(device: "bus-12").count == 2)
        try await sink.finish()
    }

    @Test func aDeviceTheGatewayCannotReachIsCountedAndThePipelineGoesOn() async throws {
        let board = try CommandBoard(store: MemoryCommandStore(), clock: ManualClock(), logger: Logger(label: "c", handler: SilentLogHandler()))
        defer { board.close() }
        let h = try Harness(Self.rules, id: "interval", commands: board)
        let sink = h.start()
        #expect(await sink.send([Self.event(.enter, n: 1), Self.event(.enter, n: 2)]))
        #expect(h.stats.value("commands.refused") == 2)
        #expect(h.log.entries(containing: "not taken").count == 1, "logged once a minute per device")
        try await sink.finish()
    }

    @Test func rulesAreCheckedWithTheirPaths() throws {
        let (_, problems) = try PluginOptions.read(CommandsSinkPlugin.self,
            #"{ "rules": [ { "on": "arrive", "command": { "type": "reboot" } }, { "on": "exit", "command": { "type": "set_interval" } }, { "on": "enter", "fence": 3, "command": { "type": "reboot" }, "when": "always" } ] }"#,
            path: "sinks.c")
        #expect(Set(problems.map(\.path)) == ["sinks.c.rules[0].on", "sinks.c.rules[1].command", "sinks.c.rules[2].fence", "sinks.c.rules[2].when"])
    }
}
