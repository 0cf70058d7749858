import Foundation
import GatewayCore
import LuaRuntime
import Testing
import TrackerProtocols

/// Examples/Lua/wialon-ips.lua under ``LuaCodec``, against the packets of the Wialon IPS
/// specification (1.1 and 2.0 layouts, built as it writes them) and two 2.0 packets from real
/// devices (Traccar's WialonProtocolDecoderTest; their CRC-16 is right).
@Suite(.timeLimit(.minutes(1))) struct WialonIPSScriptTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let path = root.appendingPathComponent("Examples/Lua/wialon-ips.lua").path

    /// Every message of `text` through one connection's codec.
    static func decode(_ text: String, script: LuaScript? = nil) throws -> [Result<TrackerMessage, TrackerFrameError>] {
        let loaded = try script ?? LuaScript(path: path, limits: LuaState.Limits(), required: ["frame", "decode"])
        var codec = LuaCodec(script: loaded, limits: TrackerLimits(maxFrameBytes: 4096), stats: nil)
        var buffer = Array(text.utf8)
        var out: [Result<TrackerMessage, TrackerFrameError>] = []
        while !buffer.isEmpty {
            let result = buffer.withUnsafeBytes { codec.decode($0, now: Timestamp(milliseconds: 0)) }
            switch result {
            case .needMore: return out
            case .message(let m, let n):
                out.append(.success(m))
                buffer.removeFirst(n)
            case .invalid(let e, let n, _):
                out.append(.failure(e))
                buffer.removeFirst(n)
            }
        }
        return out
    }

    /// `2.0;…;` with its CRC-16/ARC appended, as a 2.0 device writes it.
    static func signed(_ message: String) -> String {
        message + String(format: "%04X", CRC16.arc(Array(message.utf8)))
    }

    static func positions(_ result: Result<TrackerMessage, TrackerFrameError>?) -> TrackerRecords? {
        if case .success(.records(let r))? = result { return r }
        return nil
    }

    @Test func aLoginIdentifiesTheDeviceWithItsAnswerAndRefusal() throws {
        for login in ["#L#353976013445485;NA\r\n", "#L#\(Self.signed("2.0;353976013445485;NA;"))\r\n"] {
            let first = try Self.decode(login).first
            guard case .success(.identification(let device, let accepted, let refused))? = first else {
                Issue.record("\(login): \(String(describing: first))")
                continue
            }
            #expect(device == "353976013445485")
            #expect(accepted == Array("#AL#1\r\n".utf8) && refused == Array("#AL#0\r\n".utf8))
        }
    }

    @Test func shortDataIsAPositionAnsweredOnceCommitted() throws {
        let records = try #require(Self.positions(try Self.decode("#SD#040114;135515;5544.6025;N;03739.6834;E;35;215;110;7\r\n").first))
        #expect(records.answer == Array("#ASD#1\r\n".utf8))
        let p = try #require(records.positions.first)
        #expect(p.time == Timestamp(year: 2014, month: 1, day: 4, hour: 13, minute: 55, second: 15))
        #expect(abs((p.latitude ?? 0) - (55 + 44.6025 / 60)) < 1e-9 && abs((p.longitude ?? 0) - (37 + 39.6834 / 60)) < 1e-9)
        #expect(abs((p.speed ?? 0) - 35 / 3.6) < 1e-9 && p.course == 215 && p.altitude == 110 && p.satellites == 7 && p.mode == .threeD)
    }

    @Test func dataCarriesHDOPAndNamedParameters() throws {
        let text = "#D#040114;135515;5544.6025;S;03739.6834;W;35;215;110;7;1.0;0;0;;NA;count1:1:564,fuel:2:45.8,hw:3:V4.5\r\n"
        let records = try #require(Self.positions(try Self.decode(text).first))
        let p = try #require(records.positions.first)
        #expect((p.latitude ?? 0) < 0 && (p.longitude ?? 0) < 0 && p.hdop == 1.0)
        #expect(p.attributes == ["count1": "564", "fuel": "45.8", "hw": "V4.5"])
        #expect(records.answer == Array("#AD#1\r\n".utf8))
    }

    @Test func aBlackBoxIsOneMessageAnsweredWithItsCount() throws {
        let text = "#B#040114;135515;5544.6025;N;03739.6834;E;35;215;110;7|040114;135615;5544.6125;N;03739.6934;E;36;216;111;8\r\n"
        let records = try #require(Self.positions(try Self.decode(text).first))
        #expect(records.positions.count == 2 && records.answer == Array("#AB#2\r\n".utf8))
    }

    @Test func pingsAndDriverMessagesAreAnsweredAtOnce() throws {
        let messages = try Self.decode("#P#\r\n#M#on my way\r\n")
        guard case .success(.control(let ping, _, let pong))? = messages.first,
              case .success(.control(let message, _, let answer))? = messages.last else {
            Issue.record("\(messages)")
            return
        }
        #expect(ping == "ping" && pong == Array("#AP#\r\n".utf8))
        #expect(message == "message" && answer == Array("#AM#1\r\n".utf8))
    }

    @Test func version2PacketsOfRealDevicesAreCheckedAndRead() throws {
        let text = "#L#\(Self.signed("2.0;42001300083;NA;"))\r\n"
            + "#SD#300924;154245;5554.350052;N;3644.670410;E;2.92;NA;NA;NA;7A01\r\n"
            + "#D#220323;114150;2234.80479;N;11354.87786;E;0;NA;59;11;NA;NA;NA;;NA;d_battr:1:94,d_csq:1:21,di_light:1:1;E7C9\r\n"
            + "#SD#300924;154245;5554.350052;N;3644.670410;E;2.92;NA;NA;NA;7A02\r\n"
        let messages = try Self.decode(text)
        #expect(messages.count == 4)
        let sd = try #require(Self.positions(messages[1])?.positions.first)
        #expect(sd.time == Timestamp(year: 2024, month: 9, day: 30, hour: 15, minute: 42, second: 45))
        #expect(abs((sd.latitude ?? 0) - (55 + 54.350052 / 60)) < 1e-9)
        #expect(sd.course == nil && sd.altitude == nil)
        let d = try #require(Self.positions(messages[2])?.positions.first)
        #expect(d.attributes["d_battr"] == "94" && d.satellites == 11)
        // One digit of the CRC changed: a bad frame, never answered.
        guard case .failure(let error) = messages[3] else {
            Issue.record("\(messages[3])")
            return
        }
        #expect(error.reason == "checksum")
    }

    @Test func noiseBeforeAPacketIsSkipped() throws {
        let messages = try Self.decode("xx\r\n#P#\r\n")
        #expect(messages.count == 2)
        if case .failure(let e) = messages[0] { #expect(e.reason == "syntax") } else { Issue.record("\(messages)") }
    }
    // MARK: - Commands

    /// A codec that has read `login` (the session then knows the version), and the script.
    static func loggedIn(_ login: String) throws -> LuaCodec {
        let script = try LuaScript(path: path, limits: LuaState.Limits(), required: ["frame", "decode"], optional: ["encode_command"])
        var codec = LuaCodec(script: script, limits: TrackerLimits(maxFrameBytes: 4096), stats: nil)
        _ = Array(login.utf8).withUnsafeBytes { codec.decode($0, now: Timestamp(milliseconds: 0)) }
        return codec
    }

    static func command(_ type: CommandType, _ parameters: [String: String], id: String = "c-1") -> DeviceCommand {
        DeviceCommand(id: id, device: "truck-2", type: type, parameters: parameters, created: Timestamp(milliseconds: 0),
                      expires: Timestamp(milliseconds: 60_000), attempts: 3, submittedBy: "ops", source: "wialon")
    }

    /// The device's answer to `text` as the codec reads it.
    static func reply(_ codec: inout LuaCodec, _ text: String) -> TrackerCommandReply? {
        let result = Array(text.utf8).withUnsafeBytes { codec.decode($0, now: Timestamp(milliseconds: 0)) }
        if case .message(.commandReply(_, _, let reply, nil), _) = result { return reply }
        return nil
    }

    /// A message to the driver goes as an M packet (the 2.0 one with its CRC); the device's AM
    /// says whether it was shown.
    @Test func aTextGoesAsAMessageToTheDriverAndItsAnswerIsTheResult() throws {
        var v1 = try Self.loggedIn("#L#353976013445485;NA\r\n")
        #expect(v1.commandTypes == [.text, .custom])
        let text = Self.command(.text, ["text": "Gate 3, please"])
        let encoded = v1.encode(text, now: Timestamp(milliseconds: 0))
        let sent = try #require(encoded)
        #expect(sent == Array("#M#Gate 3, please\r\n".utf8))
        #expect(v1.awaitsReply(to: text))
        let shown = try #require(Self.reply(&v1, "#AM#1\r\n"))
        #expect(v1.outcome(of: shown, sent: sent) == .done("shown"))
        let refused = try #require(Self.reply(&v1, "#AM#0\r\n"))
        #expect(v1.outcome(of: refused, sent: sent) == .failed("refused"))

        var v2 = try Self.loggedIn("#L#\(Self.signed("2.0;353976013445485;NA;"))\r\n")
        let encoded2 = v2.encode(text, now: Timestamp(milliseconds: 0))
        #expect(encoded2 == Array("#M#\(Self.signed("Gate 3, please;"))\r\n".utf8))
    }

    /// A custom line goes as it is; the protocol has no answer for it. A type the script does not
    /// list is not carried.
    @Test func aCustomLineIsDeliveredOnceWrittenAndOtherTypesAreNotCarried() throws {
        var codec = try Self.loggedIn("#L#353976013445485;NA\r\n")
        let reboot = Self.command(.custom, ["data": "reboot"])
        let encoded = codec.encode(reboot, now: Timestamp(milliseconds: 0))
        #expect(encoded == Array("reboot\r\n".utf8))
        #expect(!codec.awaitsReply(to: reboot))
        let query = codec.encode(Self.command(.positionNow, [:], id: "c-2"), now: Timestamp(milliseconds: 0))
        #expect(query == nil)
    }

    @Test func aScriptWithEncodeCommandNamesItsTypes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wialon-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (body, problem) in [("", "no command_types"), ("command_types = { \"beep\" }", "unknown type \"beep\"")] {
            let file = directory.appendingPathComponent("s.lua").path
            try "function frame(b) return nil end\nfunction decode(f, s) return {} end\nfunction encode_command(c, s) return nil end\n\(body)\n"
                .write(toFile: file, atomically: true, encoding: .utf8)
            #expect(throws: LuaScriptError.self) {
                try LuaScript(path: file, limits: LuaState.Limits(), required: ["frame", "decode"], optional: ["encode_command"])
            }
            do {
                _ = try LuaScript(path: file, limits: LuaState.Limits(), required: ["frame", "decode"], optional: ["encode_command"])
            } catch {
                #expect(error.description.contains(problem), "\(error)")
            }
        }
    }
}
