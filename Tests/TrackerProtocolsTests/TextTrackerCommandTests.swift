import GatewayCore
import Testing
@testable import TrackerProtocols

/// Commands to the text-protocol trackers: each type as the bytes of its `*-commands.txt` vector
/// (the device of every vector is 123456789012345), and each device answer matched to its command.

/// A codec that has read `frames` (the device's own, which commands copy the form of).
func codec<Codec: TrackerCodec>(_ codec: Codec, after frames: String...) -> Codec {
    var runner = CodecRunner(codec)
    for frame in frames { runner.feed(Array(frame.utf8)) }
    return runner.codec
}

/// The first command `type` on a connection, as written.
func firstCommand<Codec: TrackerCodec>(_ codec: Codec, _ type: CommandType, _ parameters: [String: String]) -> [UInt8]? {
    var codec = codec
    return codec.encode(command(type, parameters), now: Timestamp(milliseconds: 0)).map { codec.outgoing($0) }
}

/// The message a codec reads from `frame` first.
func firstMessage<Codec: TrackerCodec>(_ codec: inout Codec, _ frame: [UInt8]) -> TrackerMessage? {
    var runner = CodecRunner(codec)
    let message = runner.feed(frame).first?.message
    codec = runner.codec
    return message
}

@Suite struct GPS103CommandTests {
    static let device = codec(GPS103Codec(limits: limits), after: "##,imei:123456789012345,A;")
    static let cases: [(String, CommandType, [String: String])] = [
        ("C1", .setInterval, ["interval": "5m"]), ("C2", .custom, ["data": "H,080"]), ("C3", .positionNow, [:]),
        ("C5", .engineStop, [:]), ("C6", .engineResume, [:]),
    ]

    @Test(arguments: cases.indices)
    func eachTypeIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, parameters) = Self.cases[index]
        let expected = try #require(try CommandVectors("gps103-commands").commands[id])
        #expect(firstCommand(Self.device, type, parameters) == expected, "\(id)")
    }

    /// The largest unit that divides the interval: nothing is rounded away.
    @Test(arguments: [(30, "30s"), (5, "05s"), (90, "90s"), (300, "05m"), (600, "10m"), (3_600, "01h"), (7_200, "02h"), (5_400, "90m")])
    func anIntervalIsWrittenInItsLargestWholeUnit(seconds: Int, text: String) {
        #expect(GPS103Codec.interval(seconds) == text)
    }

    @Test func aCommandHasNoAnswerAndNothingIsSentBeforeTheDeviceNamedItself() {
        #expect(!Self.device.awaitsReply(to: command(.engineStop)))
        #expect(firstCommand(GPS103Codec(limits: limits), .engineStop, [:]) == nil)
        #expect(firstCommand(Self.device, .reboot, [:]) == nil)
    }
}

@Suite struct WatchCommandTests {
    static let device = codec(WatchCodec(limits: limits), after: "[CS*123456789012345*0002*LK]")
    static let cases: [(String, CommandType, [String: String])] = [
        ("C1", .reboot, [:]), ("C2", .custom, ["data": "SOS1,123456789"]), ("C3", .custom, ["data": "TK,#!AMR\n%s"]),
        ("C6", .text, ["text": "text"]), ("C7", .custom, ["data": "WORK,6-9,11-13,13-15,17-19"]),
        ("C8", .custom, ["data": "LZ,,+1"]), ("C9", .custom, ["data": "LZ,,+1.5"]), ("C10", .custom, ["data": "LZ,,-1"]),
        ("C11", .custom, ["data": "LZ,,-11.5"]), ("C12", .custom, ["data": "LZ,0,+5.75"]),
        ("C13", .positionNow, [:]), ("C14", .setInterval, ["interval": "60s"]),
    ]

    @Test(arguments: cases.indices)
    func eachTypeIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, parameters) = Self.cases[index]
        let expected = try #require(try CommandVectors("watch-commands").commands[id])
        #expect(firstCommand(Self.device, type, parameters) == expected, "\(id)")
    }

    /// The form of the device's own frames: its maker, and the index of a ZJ watch.
    @Test func aCommandTakesTheMakerAndIndexOfTheDevicesFrames() {
        let indexed = codec(WatchCodec(limits: limits), after: "[ZJ*5678901234*0009*0002*LK]")
        #expect(firstCommand(indexed, .positionNow, [:]) == Array("[ZJ*5678901234*0001*0002*CR]".utf8))
        let sg = codec(WatchCodec(limits: limits), after: "[3G*9031853319*0002*LK]")
        // A text in UTF-16BE: 停 505C, 车 8F66.
        #expect(firstCommand(sg, .text, ["text": "停车"]) == Array("[3G*9031853319*0010*MESSAGE,505c8f66]".utf8))
        #expect(firstCommand(WatchCodec(limits: limits), .reboot, [:]) == nil, "no frame from the device yet")
        #expect(firstCommand(sg, .custom, ["data": "A]B"]) == nil)
    }

    /// A1: the device echoes the command's word; a word no command sent is no answer.
    @Test func theEchoOfTheCommandsWordIsItsResult() throws {
        let answer = try #require(try CommandVectors("watch-commands").answers.first)
        var device = Self.device
        guard case .control(let kind, _, _)? = firstMessage(&device, answer.bytes) else {
            Issue.record("an echo of a word not sent is a control")
            return
        }
        #expect(kind == "other")
        let encoded = device.encode(command(.reboot), now: Timestamp(milliseconds: 0))
        let sent = try #require(encoded)
        guard case .commandReply(_, let id, let reply, let ack)? = firstMessage(&device, answer.bytes) else {
            Issue.record("the echo is not a reply")
            return
        }
        #expect(id == "123456789012345" && ack == nil)
        #expect(device.outcome(of: reply, sent: sent) == .done("RESET"))
        let encodedOther = device.encode(command(.positionNow), now: Timestamp(milliseconds: 0))
        let other = try #require(encodedOther)
        #expect(device.outcome(of: reply, sent: other) == nil, "a RESET echo does not answer CR")
    }
}

@Suite struct GL200CommandTests {
    static let cases: [(String, CommandType, String)] = [
        ("C1", .positionNow, ""), ("C3", .reboot, ""), ("C4", .engineStop, ""), ("C5", .engineResume, ""), ("C6", .positionNow, "gl300"),
    ]

    @Test(arguments: cases.indices)
    func eachTypeIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, password) = Self.cases[index]
        let expected = try #require(try CommandVectors("gl200-commands").commands[id])
        #expect(firstCommand(GL200Codec(limits: limits, password: password), type, [:]) == expected, "\(id)")
    }

    /// A1: the +ACK repeats the command's name and serial number; the next command has the next
    /// serial (FFFE), so a late +ACK of the first is not its answer.
    @Test func theAcknowledgementNamingTheSerialNumberIsTheResult() throws {
        let vectors = try CommandVectors("gl200-commands")
        var device = GL200Codec(limits: limits)
        let encodedFirst = device.encode(command(.positionNow), now: Timestamp(milliseconds: 0))
        let encodedSecond = device.encode(command(.positionNow), now: Timestamp(milliseconds: 0))
        let first = try #require(encodedFirst), second = try #require(encodedSecond)
        #expect(String(decoding: second, as: UTF8.self) == "AT+GTRTO=,1,,,,,,FFFE$")
        let a1 = try #require(vectors.answers.first { $0.id == "A1" })
        guard case .commandReply(let kind, let id, let reply, let ack)? = firstMessage(&device, a1.bytes) else {
            Issue.record("+ACK:GTRTO is not a reply")
            return
        }
        #expect(kind == "GTRTO" && id == "860599000773978" && ack == nil)
        #expect(device.outcome(of: reply, sent: first) == .done("acknowledged: VER"))
        #expect(device.outcome(of: reply, sent: second) == nil)
        // With SACK, the +ACK is answered at once.
        var sack = GL200Codec(limits: limits, sack: true)
        guard case .commandReply(_, _, _, let sackAnswer)? = firstMessage(&sack, a1.bytes) else {
            Issue.record("+ACK:GTRTO is not a reply")
            return
        }
        #expect(sackAnswer == Array("+SACK:0C19$".utf8))
    }
}

@Suite struct MeitrackCommandTests {
    /// `$$<flag><length>,<IMEI>,<text>*<checksum>\r\n`: a device frame.
    static func frame(_ flag: Character, _ imei: String, _ text: String) -> [UInt8] {
        var bytes = MeitrackCodec.command(flag: UInt8(ascii: flag.unicodeScalars.first ?? "A"), imei: imei, text)
        bytes[0] = UInt8(ascii: "$")
        bytes[1] = UInt8(ascii: "$")
        // The checksum counts `$$`, not `@@`: write it again.
        let star = bytes.lastIndex(of: UInt8(ascii: "*")) ?? 0
        let sum = bytes[0...star].reduce(UInt8(0)) { $0 &+ $1 }
        let digits = Array(WireText.hex([sum]).uppercased().utf8)
        bytes[star + 1] = digits[0]
        bytes[star + 2] = digits[1]
        return bytes
    }

    static let report = "AAA,22,45.499458,-82.493581,220718171428,A,5,0,0,0,0.0,0,227940,119812,302|220|D8D6|086E1B2B,0000,0000|0000|0000|0191|0573,,,3,,002134,0,0"

    static func device() -> MeitrackCodec {
        var codec = MeitrackCodec(limits: limits)
        _ = firstMessage(&codec, frame("q", "123456789012345", report))
        return codec
    }

    static let cases: [(String, CommandType, [String: String])] = [
        ("C1", .positionNow, [:]), ("C4", .engineStop, [:]), ("C5", .engineResume, [:]), ("C9", .custom, ["data": "A11,6"]),
    ]

    @Test(arguments: cases.indices)
    func eachTypeIsTheBytesOfItsVector(index: Int) throws {
        let (id, type, parameters) = Self.cases[index]
        let expected = try #require(try CommandVectors("meitrack-commands").commands[id])
        #expect(firstCommand(Self.device(), type, parameters) == expected, "\(id)")
    }

    /// A2: the answer with the command's identifier and word says how it went; A1 has a wrong
    /// length and is a bad frame. The next command gets the next identifier.
    @Test func theAnswerWithTheCommandsIdentifierAndWordIsItsResult() throws {
        let vectors = try CommandVectors("meitrack-commands")
        var device = MeitrackCodec(limits: limits)
        let a2 = try #require(vectors.answers.first { $0.id == "A2" })
        guard case .commandReply(let kind, let id, let reply, nil)? = firstMessage(&device, a2.bytes + [0x0D, 0x0A]) else {
            Issue.record("D03,OK is not a reply")
            return
        }
        #expect(kind == "D03" && id == "353358017784062")
        let photo = MeitrackCodec.command(flag: UInt8(ascii: "D"), imei: "353358017784062", "D03,1,camera_picture.jpg")
        #expect(device.outcome(of: reply, sent: photo) == .done("OK"))
        #expect(device.outcome(of: reply, sent: MeitrackCodec.command(flag: UInt8(ascii: "E"), imei: "353358017784062", "D03,1,x.jpg")) == nil)
        let a1 = try #require(vectors.answers.first { $0.id == "A1" })
        var runner = CodecRunner(MeitrackCodec(limits: limits))
        #expect(runner.feed(a1.bytes + [0x0D, 0x0A]).first == .invalid(reason: "length", close: false))

        var codec = Self.device()
        let encodedFirst = codec.encode(command(.engineStop), now: Timestamp(milliseconds: 0))
        let encodedSecond = codec.encode(command(.engineResume), now: Timestamp(milliseconds: 0))
        let first = try #require(encodedFirst), second = try #require(encodedSecond)
        #expect(first[2] == UInt8(ascii: "A") && second[2] == UInt8(ascii: "B"))
        guard case .commandReply(_, _, let ok, _)? = firstMessage(&codec, Self.frame("B", "123456789012345", "C01,OK")) else {
            Issue.record("C01,OK is not a reply")
            return
        }
        #expect(codec.outcome(of: ok, sent: second) == .done("OK"))
        #expect(codec.outcome(of: ok, sent: first) == nil)
    }

    /// A10 is answered by a report with its identifier: a position, and the query's result.
    @Test func aPositionQueryIsAnsweredByTheReportWithItsIdentifier() throws {
        var codec = Self.device()
        let encoded = codec.encode(command(.positionNow), now: Timestamp(milliseconds: 0))
        let query = try #require(encoded)
        #expect(firstMessage(&codec, Self.frame("c", "123456789012345", Self.report))?.records?.reply == nil, "another identifier")
        let message = firstMessage(&codec, Self.frame("A", "123456789012345", Self.report))
        let answer = try #require(message?.records)
        #expect(answer.positions.count == 1)
        let reply = try #require(answer.reply)
        #expect(codec.outcome(of: reply, sent: query) == .done("position reported"))
    }
}

@Suite struct SuntechCommandTests {
    static let id = "123456789012345"
    static let legacy = codec(SuntechCodec(limits: limits),
                              after: "ST300STT;\(id);40;313;20190220;12:05:04;c99e48;+04.644623;-074.076922;010.390;202.77;20;1;997100;14.10;100000;2;8384;003634;4.1;1\r")
    static let universal = codec(SuntechCodec(limits: limits),
                                 after: "STT;\(id);3FFFFF;26;398;0;20170827;20:04:37;087d4760;310;410;0ba0;23;+40.123420;-074.995971;000.031;000.00;8;1;00000001;00000000;1;1;0006\r")
    /// A keep-alive names the device but shows no model: Traccar's SA200.
    static let unseen = codec(SuntechCodec(limits: limits), after: "SA200ALV;\(id)\r")

    static let cases: [(String, SuntechCodec, CommandType)] = [
        ("C1", unseen, .reboot), ("C2", legacy, .positionNow), ("C3", legacy, .engineStop), ("C4", legacy, .engineResume),
        ("C6", universal, .reboot), ("C7", universal, .positionNow), ("C8", universal, .engineStop), ("C9", universal, .engineResume),
    ]

    @Test(arguments: cases.indices)
    func eachTypeIsTheBytesOfItsVector(index: Int) throws {
        let (vector, device, type) = Self.cases[index]
        let expected = try #require(try CommandVectors("suntech-commands").commands[vector])
        #expect(firstCommand(device, type, [:]) == expected, "\(vector)")
    }

    /// A1 (universal) and a legacy `CMD;Res`: the answer naming the command's action is its result.
    @Test func theResultNamingTheActionIsTheCommandsResult() throws {
        let a1 = try #require(try CommandVectors("suntech-commands").answers.first)
        var device = SuntechCodec(limits: limits)
        guard case .commandReply(let kind, let id, let reply, nil)? = firstMessage(&device, a1.bytes + [0x0D]) else {
            Issue.record("RES is not a reply")
            return
        }
        #expect(kind == "command_result" && id == "4309999001")
        #expect(device.outcome(of: reply, sent: Array("CMD;4309999001;04;02\r".utf8)) == .done("TEST"))
        #expect(device.outcome(of: reply, sent: Array("CMD;4309999001;04;01\r".utf8)) == nil)
        guard case .commandReply(_, _, let legacyReply, _)? = firstMessage(&device, Array("ST300CMD;Res;511848119;319H;Disable1\r".utf8)) else {
            Issue.record("CMD;Res is not a reply")
            return
        }
        #expect(device.outcome(of: legacyReply, sent: Array("ST300CMD;511848119;02;Disable1\r".utf8)) == .done("Disable1"))
        #expect(device.outcome(of: legacyReply, sent: Array("ST300CMD;511848119;02;Enable1\r".utf8)) == nil)
    }
}
