import DeviceCommands
import Foundation
import GatewayCore
import GatewayTesting
import Testing
import TrackerInput

/// The `lua_tracker` source with Examples/Lua/wialon-ips.lua on loopback: the script's answers
/// go out at once or only after the commit, as it says; the allow-list refuses with its answer.
@Suite(.timeLimit(.minutes(1))) struct LuaTrackerSourceTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Examples/Lua/wialon-ips.lua").path
    static func text(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func aScriptedProtocolIsAnsweredOnceItsPositionsAreHandled() async throws {
        let acks = HeldAcknowledgements()
        let json = #"{ "type": "lua_tracker", "script": "\#(Self.script)", "listen": "127.0.0.1:PORT", "devices": { "353976013445485": "truck-2" } }"#
        try await withSource(LuaTrackerSourcePlugin.self, json, output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text("#L#353976013445485;NA\r\n"))
            #expect(device.read(count: 7) == Self.text("#AL#1\r\n"))
            device.send(Self.text("#SD#040114;135515;5544.6025;N;03739.6834;E;35;215;110;7\r\n#P#\r\n"))
            #expect(device.read(count: 6) == Self.text("#AP#\r\n"), "the ping at once")
            #expect(await Poll.until { acks.positions.count == 1 })
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            #expect(device.read(count: 8) == Self.text("#ASD#1\r\n"))
            #expect(acks.positions.first?.device == "truck-2")
            #expect(acks.positions.first?.time == Timestamp(year: 2014, month: 1, day: 4, hour: 13, minute: 55, second: 15))
            #expect(context.stats.value("messages.SD") == 1)
        }
    }

    @Test func anUnknownDeviceGetsTheScriptsRefusalAndIsClosed() async throws {
        let acks = HeldAcknowledgements()
        let json = #"{ "type": "lua_tracker", "script": "\#(Self.script)", "listen": "127.0.0.1:PORT", "devices": { "1": "x" } }"#
        try await withSource(LuaTrackerSourcePlugin.self, json, output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text("#L#353976013445485;NA\r\n#SD#040114;135515;5544.6025;N;03739.6834;E;35;215;110;7\r\n"))
            #expect(device.read(count: 7) == Self.text("#AL#0\r\n"))
            #expect(device.waitForClose())
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("devices.unknown") == 1)
        }
    }
    /// The script's encode_command on the device's connection: a message to the driver, its AM
    /// the command's result; a type the script does not list is refused when submitted.
    @Test func aCommandGoesAsTheScriptEncodesItAndItsReplyIsTheResult() async throws {
        let board = try CommandBoard(store: MemoryCommandStore(), clock: SystemClock(), logger: Logger(label: "c", handler: SilentLogHandler()))
        defer { board.close() }
        let json = #"{ "type": "lua_tracker", "script": "\#(Self.script)", "listen": "127.0.0.1:PORT", "devices": { "353976013445485": "truck-2" } }"#
        try await withSource(LuaTrackerSourcePlugin.self, json, output: HeldAcknowledgements().output, commands: board) { port, _ in
            #expect(throws: CommandError.self) { try board.submit(CommandRequest(device: "truck-2", type: .positionNow, submittedBy: "ops")) }
            let text = try board.submit(CommandRequest(device: "truck-2", type: .text, parameters: ["text": "Gate 3"], submittedBy: "ops"))
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text("#L#353976013445485;NA\r\n"))
            #expect(device.read(count: 7) == Self.text("#AL#1\r\n"))
            #expect(device.read(count: 11) == Self.text("#M#Gate 3\r\n"))
            device.send(Self.text("#AM#1\r\n"))
            #expect(await Poll.until { board.command(text.id)?.status == .done })
            #expect(board.command(text.id)?.result == "shown")
        }
    }
}
