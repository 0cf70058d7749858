import Foundation
import GatewayCore
import Testing
@testable import TrackerProtocols

/// JT/T 808 commands against `Fixtures/jt808-commands.txt` (Traccar's encoder tests and the
/// standard's messages): the bytes a terminal receives for each type, and its answers.
@Suite struct JT808CommandTests {
    /// The `command:` hex of case `id`.
    static func expected(_ id: String) -> [UInt8]? {
        guard let url = Bundle.module.url(forResource: "jt808-commands", withExtension: "txt", subdirectory: "Fixtures"),
              let text = try? String(contentsOf: url, encoding: .utf8) else { return nil }
        var inCase = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") { inCase = line.hasPrefix("[\(id)]") }
            if inCase, line.hasPrefix("command: ") { return TrackerVectors.bytes(hex: String(line.dropFirst(9))) }
        }
        return nil
    }

    /// A codec that has read a heartbeat from the terminal of Traccar's tests (its IMEI
    /// 123456789012345 in the phone field as 48 bits: 0b3a73ce2ff2).
    static func codec() -> JT808Codec {
        var codec = JT808Codec(options: .init(limits: TrackerLimits(maxFrameBytes: 4096)))
        var runner = CodecRunner(codec)
        runner.feed(JT808FramingTests.frame(0x0002, [], serial: 1, phone: [0x0B, 0x3A, 0x73, 0xCE, 0x2F, 0xF2]))
        codec = runner.codec
        return codec
    }

    static func command(_ type: CommandType, _ parameters: [String: String] = [:]) -> DeviceCommand {
        DeviceCommand(id: "c", device: "d", type: type, parameters: parameters, created: Timestamp(milliseconds: 0),
                      expires: Timestamp(milliseconds: 1), attempts: 1, submittedBy: "t", source: "s")
    }

    /// Each type, as the first server message on the connection (serial 0), and its case.
    static let cases: [(String, CommandType, [String: String])] = [
        ("C1", .engineStop, [:]), ("C5", .engineResume, [:]), ("C9", .reboot, [:]), ("C10", .positionNow, [:]),
        // C3 is Traccar's custom command to a BSJ terminal: a text message with flag 01 (emergency),
        // which such terminals take as an SMS command; a `text` with that flag is its bytes.
        ("C8", .setInterval, ["interval": "30s"]), ("C3", .text, ["text": "Test, Command, 123#", "flags": "0x01"]),
        ("C4", .custom, ["data": "TEST"]),
        ("C2", .custom, ["hex": "7e830000140b3a73ce2ff2000001546573742c20436f6d6d616e642c2031323323a57e"]),
    ]

    @Test(arguments: cases.indices)
    func eachTypeIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, parameters) = Self.cases[index]
        var codec = Self.codec()
        let encoded = codec.encode(Self.command(type, parameters), now: Timestamp(milliseconds: 0))
        let bytes = try #require(encoded)
        let wire = codec.outgoing(bytes)
        #expect(wire == Self.expected(id), "\(id) \(type.rawValue): \(hex(wire))")
    }

    @Test func theTerminalsGeneralResponseSaysTheOutcome() throws {
        var codec = Self.codec()
        let encoded = codec.encode(Self.command(.reboot), now: Timestamp(milliseconds: 0))
        let sent = codec.outgoing(try #require(encoded))
        let terminal: [UInt8] = [0x0B, 0x3A, 0x73, 0xCE, 0x2F, 0xF2]
        for (result, outcome) in [(UInt8(0), CommandOutcome.done("success")), (1, .failed("failure")), (3, .failed("not supported"))] {
            var runner = CodecRunner(codec)
            // 0x0001: reply serial 0000 (the command's), reply id 8105, the result.
            let events = runner.feed(JT808FramingTests.frame(0x0001, [0x00, 0x00, 0x81, 0x05, result], serial: 7, phone: terminal))
            guard case .commandReply(_, let device, let reply, let answer)? = events.first?.message else {
                Issue.record("\(events)")
                return
            }
            // The field holds 14 digits; the 15th is their Luhn digit (7: Traccar's test IMEI is not a real one).
            #expect(device == "123456789012347")
            #expect(answer == nil, "a terminal's general response is never answered")
            #expect(codec.outcome(of: reply, sent: sent) == outcome)
        }
        // An answer to another serial or message is not this command's.
        #expect(codec.outcome(of: TrackerCommandReply(reference: [0x00, 0x01, 0x81, 0x05], code: 0), sent: sent) == nil)
        #expect(codec.outcome(of: TrackerCommandReply(reference: [0x00, 0x00, 0x81, 0x03], code: 0), sent: sent) == nil)
    }

    @Test func aPositionQueryIsAnsweredByTheLocationItAsksFor() throws {
        var codec = Self.codec()
        let encoded = codec.encode(Self.command(.positionNow), now: Timestamp(milliseconds: 0))
        let sent = codec.outgoing(try #require(encoded))
        var runner = CodecRunner(codec)
        let body = [0x00, 0x00] + JT808FramingTests.location
        let records = try #require(runner.feed(JT808FramingTests.frame(0x0201, body, serial: 8, phone: [0x0B, 0x3A, 0x73, 0xCE, 0x2F, 0xF2])).first?.message?.records)
        #expect(records.positions.count == 1)
        let reply = try #require(records.reply)
        #expect(codec.outcome(of: reply, sent: sent) == .done("position reported"))
    }

    @Test func aTextInChineseGoesInGBK() throws {
        var codec = Self.codec()
        let encoded = codec.encode(Self.command(.text, ["text": "请停车"]), now: Timestamp(milliseconds: 0))
        let bytes = try #require(encoded)
        // 请 C7EB, 停 CDA3, 车 B3B5 in GBK, after the flag.
        #expect(Array(bytes.suffix(7)) == [0x0C, 0xC7, 0xEB, 0xCD, 0xA3, 0xB3, 0xB5])
    }

    /// 0x8300's flag: bit 0 emergency, bit 2 terminal display, bit 3 TTS read-out. A text for the
    /// driver is shown and read out (0x0C), not an emergency; 2019 adds the text type (1, notice).
    @Test func aTextIsShownAndReadOutByDefault() throws {
        var codec = Self.codec()
        let encoded = codec.encode(Self.command(.text, ["text": "Hi"]), now: Timestamp(milliseconds: 0))
        let bytes = try #require(encoded)
        #expect(Array(bytes[12...]) == [0x0C] + Array("Hi".utf8))
        // A terminal that spoke 2019: version 1, a 10-byte phone.
        var codec2019 = JT808Codec(options: .init(limits: TrackerLimits(maxFrameBytes: 4096)))
        var data = JT808FramingTests.word(0x0002) + JT808FramingTests.word(0x4000) + [1] + [UInt8](repeating: 0, count: 4) + JT808FramingTests.phone
            + JT808FramingTests.word(1)
        data.append(data.reduce(0, ^))
        var runner = CodecRunner(codec2019)
        #expect(runner.feed(JT808FramingTests.escapeWrapped(data)).first?.message?.controlKind == "0x0002")
        codec2019 = runner.codec
        let encoded2019 = codec2019.encode(Self.command(.text, ["text": "Hi"]), now: Timestamp(milliseconds: 0))
        let bytes2019 = try #require(encoded2019)
        #expect(Array(bytes2019[17...]) == [0x0C, 0x01] + Array("Hi".utf8))
    }

    @Test(arguments: [("1", UInt8(0x01)), ("0x0D", 0x0D), ("9", 0x09), ("0", 0x00)])
    func aTextsFlagsCanBeGiven(flags: String, byte: UInt8) throws {
        var codec = Self.codec()
        let encoded = codec.encode(Self.command(.text, ["text": "Hi", "flags": flags]), now: Timestamp(milliseconds: 0))
        let bytes = try #require(encoded)
        #expect(bytes[12] == byte)
    }
}
