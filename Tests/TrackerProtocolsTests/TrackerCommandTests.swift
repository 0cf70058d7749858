import Foundation
import GatewayCore
import Testing
@testable import TrackerProtocols

/// The `*-commands.txt` fixtures: each case's `command:` bytes (hex, or text for H02) and each
/// device answer's `answer:` with its `ref-decode` text.
struct CommandVectors {
    var commands: [String: [UInt8]] = [:]
    var answers: [(id: String, bytes: [UInt8], text: String?, failed: Bool)] = []

    init(_ name: String) throws {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "txt", subdirectory: "Fixtures"))
        var current = ""
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") {
            if line.hasPrefix("[") { current = String(line.dropFirst().prefix { $0 != "]" }) }
            if line.hasPrefix("command: ") { commands[current] = Self.bytes(String(line.dropFirst(9))) }
            if line.hasPrefix("answer: ") { answers.append((current, Self.bytes(String(line.dropFirst(8))), nil, false)) }
            if line.hasPrefix("ref-decode: "), current.hasPrefix("A"), let last = answers.indices.last,
               let o = try? JSONValue.parse(string: String(line.dropFirst(12))).objectValue {
                answers[last].text = o["text"]?.stringValue
                answers[last].failed = o["resultOrParams"]?.arrayValue?.contains(.string("ERROR")) ?? false
            }
        }
    }

    /// Hex, or text when it is not all hex digits (H02's sentences), with `\r` and `\n` written as escapes.
    static func bytes(_ value: String) -> [UInt8] {
        if value.allSatisfy(\.isHexDigit) && value.count % 2 == 0 { return TrackerVectors.bytes(hex: value) }
        return Array(value.replacingOccurrences(of: "\\r", with: "\r").replacingOccurrences(of: "\\n", with: "\n").utf8)
    }
}

func command(_ type: CommandType, _ parameters: [String: String] = [:]) -> DeviceCommand {
    DeviceCommand(id: "c", device: "d", type: type, parameters: parameters, created: Timestamp(milliseconds: 0),
                  expires: Timestamp(milliseconds: 1), attempts: 1, submittedBy: "t", source: "s")
}

@Suite struct TeltonikaCommandTests {
    static let cases: [(String, CommandType, [String: String])] = [
        ("C1", .custom, ["data": "setdigout 11"]), ("C2", .custom, ["hex": "03030000000185E8"]),
        ("C3", .engineStop, [:]), ("C4", .engineResume, [:]), ("C5", .custom, ["data": "getinfo"]),
    ]

    @Test(arguments: cases.indices)
    func eachCommandIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, parameters) = Self.cases[index]
        var codec = TeltonikaCodec(transport: .tcp, limits: limits)
        let encoded = codec.encode(command(type, parameters), now: Timestamp(milliseconds: 0))
        #expect(encoded.map { codec.outgoing($0) } == (try CommandVectors("teltonika-commands")).commands[id], "\(id)")
    }

    @Test func aCodec12ResponseIsTheResultOfTheCommandInFlight() throws {
        let vectors = try CommandVectors("teltonika-commands")
        #expect(vectors.answers.count == 4)
        for answer in vectors.answers {
            var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
            runner.feed(TeltonikaVectorTests.imeiFrame + answer.bytes)
            guard case .commandReply(_, _, let reply, let ack)? = runner.messages.last else {
                Issue.record("\(answer.id): \(runner.events)")
                continue
            }
            #expect(ack == nil, "a response is never answered")
            // Printable text as the device wrote it; a binary answer (A2) in hex.
            let text = answer.text ?? ""
            let expected = text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F || $0 == "\r" || $0 == "\n" })
                ? text.trimmingCharacters(in: [" ", "\r", "\n"])
                : hex(text.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) })
            #expect(runner.codec.outcome(of: reply, sent: []) == .done(expected), "\(answer.id)")
        }
    }

    @Test func udpCarriesNoCommand() {
        var codec = TeltonikaCodec(transport: .udp, limits: limits)
        #expect(codec.commandTypes.isEmpty)
        #expect(codec.encode(command(.engineStop), now: Timestamp(milliseconds: 0)) != nil, "the bytes exist; the source offers none over UDP")
    }
}

@Suite struct GT06CommandTests {
    static let cases: [(String, CommandType, [String: String])] = [
        ("C1", .engineStop, [:]), ("C2", .engineResume, [:]), ("C4", .custom, ["data": "WHERE#"]), ("C4", .positionNow, [:]),
    ]

    @Test(arguments: cases.indices)
    func eachCommandIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, parameters) = Self.cases[index]
        var codec = GT06Codec(limits: limits)
        let encoded = codec.encode(command(type, parameters), now: Timestamp(milliseconds: 0))
        #expect(encoded.map { codec.outgoing($0) } == (try CommandVectors("gt06-commands")).commands[id], "\(id)")
    }

    @Test func theDeviceStringEchoingTheServerFlagIsTheResult() throws {
        var codec = GT06Codec(limits: limits)
        let encoded = codec.encode(command(.engineStop), now: Timestamp(milliseconds: 0))
        let sent = try #require(encoded)
        let vectors = try CommandVectors("gt06-commands")
        var matched = 0
        for answer in vectors.answers {
            var runner = CodecRunner(GT06Codec(limits: limits))
            guard case .commandReply(_, _, let reply, _)? = runner.feed(answer.bytes).first?.message else { continue }
            #expect(codec.outcome(of: reply, sent: sent) == .done(answer.text ?? ""), "\(answer.id)")
            matched += 1
        }
        // A3 has a wrong CRC: rejected, so 7 of the 8 answers are read.
        #expect(matched == 7)
        // Another server flag is another command's answer.
        #expect(codec.outcome(of: TrackerCommandReply(reference: [0, 0, 0, 1], text: "x"), sent: sent) == nil)
    }

    @Test func eachCommandOnAConnectionHasItsOwnServerFlag() throws {
        var codec = GT06Codec(limits: limits)
        let encodedFirst = codec.encode(command(.engineStop), now: Timestamp(milliseconds: 0))
        let encodedSecond = codec.encode(command(.engineResume), now: Timestamp(milliseconds: 0))
        let first = try #require(encodedFirst), second = try #require(encodedSecond)
        #expect(Array(first[5..<9]) == [0, 0, 0, 0] && Array(second[5..<9]) == [0, 0, 0, 1])
        // A late answer to the first is not the second's.
        #expect(codec.outcome(of: TrackerCommandReply(reference: [0, 0, 0, 0], text: "Relay,1 OK"), sent: second) == nil)
        #expect(codec.outcome(of: TrackerCommandReply(reference: [0, 0, 0, 1], text: "Relay,0 OK"), sent: second) == .done("Relay,0 OK"))
    }
}

@Suite struct H02CommandTests {
    static let cases: [(String, CommandType, [String: String])] = [
        ("C3", .engineStop, [:]), ("C4", .engineResume, [:]), ("C5", .setInterval, ["interval": "10s"]),
    ]
    /// Traccar's tests send at 01:02:03 UTC.
    static let now = Timestamp(year: 2026, month: 1, day: 1, hour: 1, minute: 2, second: 3)

    static func codec() -> H02Codec {
        var runner = CodecRunner(H02Codec(limits: limits, acknowledgePositions: false))
        runner.feed(Array("*HQ,123456789012345,HTBT#".utf8))
        return runner.codec
    }

    @Test(arguments: cases.indices)
    func eachCommandIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, parameters) = Self.cases[index]
        var codec = Self.codec()
        let encoded = codec.encode(command(type, parameters), now: Self.now)
        #expect(encoded.map { codec.outgoing($0) } == (try CommandVectors("h02-commands")).commands[id],
                "\(id): \(encoded.map { String(decoding: $0, as: UTF8.self) } ?? "nil")")
    }

    @Test func aV4ReplyNamingTheCommandIsItsResult() throws {
        var codec = Self.codec()
        let vectors = try CommandVectors("h02-commands")
        for answer in vectors.answers {
            var runner = CodecRunner(H02Codec(limits: limits, acknowledgePositions: false))
            let message = try #require(runner.feed(answer.bytes).first?.message)
            let reply = try #require(message.records?.reply, "\(answer.id): \(message)")
            #expect(message.records?.positions.count == 1)
            let word = String(decoding: reply.reference, as: UTF8.self)
            let sent = Array("*HQ,2020916012,\(word),010203,1,1#".utf8)
            let outcome = codec.outcome(of: reply, sent: sent)
            #expect(answer.failed ? outcome?.isFailure == true : outcome?.isFailure == false, "\(answer.id): \(String(describing: outcome))")
        }
        let encoded = codec.encode(command(.engineStop), now: Self.now)
        let engine = try #require(encoded)
        #expect(codec.outcome(of: TrackerCommandReply(reference: Array("S71".utf8), text: "DONE"), sent: engine) == nil)
    }
}

extension CommandOutcome {
    var isFailure: Bool {
        if case .failed = self { return true }
        return false
    }
}
