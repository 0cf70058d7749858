import DeviceCommands
import DeviceIntake
import GatewayCore
import GatewayTesting
import Testing
import TrackerInput

/// The text-protocol sources on real loopback connections: answers at once or only after the
/// commit as each protocol has them, the allow-list, bad frames counted and unanswered.
@Suite(.timeLimit(.minutes(1))) struct TextTrackerSourceTests {
    static func text(_ s: String) -> [UInt8] { Array(s.utf8) }

    static let gps103Fix = "imei:359586015829802,tracker,0809231429,13554900601,F,062947.294,A,2234.4026,N,11354.3277,E,0.00,;"
    static let gps103SOS = "imei:359586015829802,help me,0809231429,13554900601,F,062948.294,A,2234.4026,N,11354.3277,E,0.00,;"

    @Test func gps103AnswersLoginsAtOnceAndAnSOSOnlyOnceItIsHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GPS103SourcePlugin.self, #"{ "type": "gps103", "listen": "127.0.0.1:PORT", "devices": { "359586015829802": "van-4" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text("##,imei:359586015829802,A;"))
            #expect(device.read(count: 4) == Self.text("LOAD"))
            device.send(Self.text(Self.gps103Fix + "\r\n" + Self.gps103SOS))
            #expect(await Poll.until { acks.positions.count == 2 })
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            device.send(Self.text("359586015829802;"))
            #expect(device.read(count: 2) == Self.text("ON"))
            acks.acknowledge()
            #expect(device.read(count: 26) == Self.text("**,imei:359586015829802,E;"))
            #expect(acks.positions.map(\.device) == ["van-4", "van-4"])
            #expect(acks.positions.last?.attributes["alarm"] == "sos")
            // The fix owes nothing; the SOS its answer.
            #expect(await Poll.until { context.stats.value("acks.sent") == 1 })
        }
    }

    @Test func gps103RefusesAnUnknownDeviceWithoutAnAnswer() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GPS103SourcePlugin.self, #"{ "type": "gps103", "listen": "127.0.0.1:PORT", "devices": { "1": "x" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text("##,imei:359586015829802,A;" + Self.gps103Fix))
            #expect(device.waitForClose())
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("devices.unknown") == 1)
        }
    }

    @Test func gps103OverUDPAnswersEachDatagramToItsSender() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GPS103SourcePlugin.self, #"{ "type": "gps103", "udp": true, "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                             output: acks.output, udp: true) { port, _ in
            let device = try LoopbackUDPSender()
            var answer: [UInt8]?
            #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                device.send(Self.text("359586015829802"), to: port)
                answer = device.receive(timeout: .milliseconds(50))
                return answer != nil
            })
            #expect(answer == Self.text("ON"))
            device.send(Self.text(String(Self.gps103Fix.dropLast())), to: port)
            #expect(await Poll.until { acks.positions.count == 1 })
        }
    }

    @Test func watchesAreAnsweredTheLinkAtOnceAndAnAlarmOnceHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(WatchSourcePlugin.self, #"{ "type": "watch", "listen": "127.0.0.1:PORT", "devices": { "8800000015": "lena" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text("[SG*8800000015*0002*LK]"))
            #expect(device.read(count: 23) == Self.text("[SG*8800000015*0002*LK]"))
            let fix = "220414,134652,A,22.571707,N,113.8613968,E,0.1,0.0,100,7,60,90,1000,50,0000,4,1,460,0,9360,4082,131"
            // A wrong length field is taken as the brackets say; a bad escape is a bad frame.
            device.send(Self.text("[SG*8800000015*0001*UD2,\(fix)][SG*8800000015*0005*TK,}09][SG*8800000015*0087*AL,\(fix)]"))
            #expect(await Poll.until { acks.positions.count == 2 })
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            #expect(device.read(count: 23) == Self.text("[SG*8800000015*0002*AL]"))
            #expect(acks.positions.map { $0.attributes["alarm"] } == [nil, "AL"])
            #expect(context.stats.value("frames.bad.syntax") == 1)
        }
    }

    static let gl200Fix = "+RESP:GTFRI,DE0114,865284042140479,,0,0,1,1,0.0,0,28.0,-118.268093,33.975430,20200901105954,0311,0480,3500,00D07F02,18,0,,93,0,,,20200901110000,0355$"
    static let gl200Buffered = "+BUFF:GTFRI,DE0114,865284042140479,,0,0,1,1,0.0,0,28.0,-118.268093,33.975430,20200901105854,0311,0480,3500,00D07F02,18,0,,93,0,,,20200901110002,0356$"
    static let gl200Heartbeat = "+ACK:GTHBD,DE0114,865284042140479,,20200901110005,0357$"

    @Test func gl200WithSackAnswersReportsOnlyOnceHandledAndHeartbeatsAtOnce() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GL200SourcePlugin.self, #"{ "type": "gl200", "listen": "127.0.0.1:PORT", "sack": true, "devices": { "865284042140479": "truck-9" } }"#,
                             output: acks.output) { port, _ in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text(Self.gl200Fix + Self.gl200Buffered))
            #expect(await Poll.until { acks.positions.count == 2 })
            device.send(Self.text(Self.gl200Heartbeat))
            let heartbeat = "+SACK:GTHBD,DE0114,0357$+SACK:0357$"
            #expect(device.read(count: heartbeat.utf8.count) == Self.text(heartbeat))
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            #expect(device.read(count: 22) == Self.text("+SACK:0355$+SACK:0356$"))
            #expect(acks.positions.map { $0.attributes["late"] } == [nil, "true"])
        }
    }

    @Test func gl200WithoutSackAnswersOnlyHeartbeats() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GL200SourcePlugin.self, #"{ "type": "gl200", "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                             output: acks.output) { port, _ in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.text(Self.gl200Fix))
            #expect(await Poll.until { acks.positions.count == 1 })
            acks.acknowledge()
            device.send(Self.text(Self.gl200Heartbeat))
            let heartbeat = "+SACK:GTHBD,DE0114,0357$"
            #expect(device.read(count: heartbeat.utf8.count) == Self.text(heartbeat))
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
        }
    }

    static let meitrackReport = "$$O160,863835028611502,AAA,35,7.887840,98.375193,200202020238,A,12,4,0,279,0.6,45,32121,442492,520|3|12DF|015273E2,0000,0000|0000|0000|018D|04F0,00000001,,1,0000*F3\r\n"

    @Test func meitrackAnswersACacheBatchOnlyOnceHandledAndNeverABadFrame() async throws {
        let acks = HeldAcknowledgements()
        // A CCC batch of one packet (Traccar's MeitrackProtocolDecoderTest).
        let batch = bytes(hex: "24245838362c3336393830303031343039303032312c4343432c020134000100000023381f91ffe354b806c5e3121b0009130000000000000000d33801007cbf0200fe0101000435feeb02000500a3010000000000002a62650d0a")
        var broken = Self.text(Self.meitrackReport)
        broken[broken.count - 3] = UInt8(ascii: "0")
        try await withSource(MeitrackSourcePlugin.self, #"{ "type": "meitrack", "listen": "127.0.0.1:PORT", "devices": { "863835028611502": "bus-3", "369800014090021": "bus-4" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(broken + Self.text(Self.meitrackReport))
            #expect(await Poll.until { acks.positions.count == 1 })
            let other = try LoopbackTCPClient(port: port)
            other.send(batch)
            #expect(await Poll.until { acks.positions.count == 2 })
            #expect(other.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            let answer = "@@X27,369800014090021,CCC,1*E4\r\n"
            #expect(other.read(count: answer.utf8.count) == Self.text(answer))
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            #expect(context.stats.value("frames.bad.checksum") == 1)
            #expect(acks.positions.last?.attributes["late"] == "true")
        }
    }

    @Test func suntechReportsOfEveryFormReachThePipelineUnanswered() async throws {
        let acks = HeldAcknowledgements()
        let zip = bytes(hex: "02003210511340877028813f180c170016041051290c0635652d793653000038001a30e601665e560000000100750002712704000103")
        let reports = Self.text("ST300STT;007238270;40;313;20190220;12:05:04;c99e48;+04.644623;-074.076922;010.390;202.77;20;1;997100;14.10;100000;2;8384;003634;4.1;1\r"
                                + "STT;0560001616;BFFFFF;56;1.0.15;1;20200219;20:52:25;00008D6C;334;20;0925;24;+20.741764;-103.430364;0.00;0.00;19;1;00000001;00000000;2;1;1765;00008003;0.0;12.14;136598\r")
        try await withSource(SuntechSourcePlugin.self, #"{ "type": "suntech", "listen": "127.0.0.1:PORT", "devices": { "007238270": "a", "0560001616": "b", "511340877": "c" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(reports + zip + Self.text("ST300STT;999;40;313\r"))
            #expect(await Poll.until { acks.positions.count == 3 })
            acks.acknowledge()
            #expect(acks.positions.map(\.device) == ["a", "b", "c"])
            // An unknown device closes the connection.
            #expect(device.waitForClose())
            #expect(context.stats.value("devices.unknown") == 1)
            #expect(context.stats.value("acks.sent") == 0)
        }
    }
    // MARK: - Commands

    /// A command board in memory for `body`.
    static func withBoard(_ body: (CommandBoard) async throws -> Void) async throws {
        let board = try CommandBoard(store: MemoryCommandStore(), clock: SystemClock(), logger: Logger(label: "c", handler: SilentLogHandler()))
        defer { board.close() }
        try await body(board)
    }

    /// gps103-commands.txt C5 on the device's connection once it logged in; the protocol has no
    /// answer for it, so it is `delivered` once written, and the next command follows.
    @Test func aGPS103EngineStopGoesAsTheVectorsBytesAndIsDeliveredOnceWritten() async throws {
        try await Self.withBoard { board in
            try await withSource(GPS103SourcePlugin.self, #"{ "type": "gps103", "listen": "127.0.0.1:PORT", "devices": { "123456789012345": "van-4" } }"#,
                                 output: HeldAcknowledgements().output, commands: board) { port, context in
                let stop = try board.submit(CommandRequest(device: "van-4", type: .engineStop, submittedBy: "ops"))
                let interval = try board.submit(CommandRequest(device: "van-4", type: .setInterval, parameters: ["interval": "5m"], submittedBy: "ops"))
                let device = try LoopbackTCPClient(port: port)
                device.send(Self.text("##,imei:123456789012345,A;"))
                #expect(device.read(count: 4) == Self.text("LOAD"))
                #expect(device.read(count: 25) == Self.text("**,imei:123456789012345,J"))
                #expect(await Poll.until { board.command(stop.id)?.status == .delivered })
                // gps103-commands.txt C1.
                #expect(device.read(count: 29) == Self.text("**,imei:123456789012345,C,05m"))
                #expect(await Poll.until { board.command(interval.id)?.status == .delivered })
                #expect(context.stats.value("commands.unmatched_replies") == 0)
            }
        }
    }

    /// watch-commands.txt C13 in the maker and id of the watch's frames; the watch's echo of the
    /// word is the command's result.
    @Test func aWatchPositionQueryGoesInTheWatchsFormAndItsEchoIsTheResult() async throws {
        try await Self.withBoard { board in
            try await withSource(WatchSourcePlugin.self, #"{ "type": "watch", "listen": "127.0.0.1:PORT", "devices": { "8800000015": "lena" } }"#,
                                 output: HeldAcknowledgements().output, commands: board) { port, context in
                let query = try board.submit(CommandRequest(device: "lena", type: .positionNow, submittedBy: "ops"))
                let device = try LoopbackTCPClient(port: port)
                device.send(Self.text("[SG*8800000015*0002*LK]"))
                #expect(device.read(count: 23) == Self.text("[SG*8800000015*0002*LK]"))
                #expect(device.read(count: 23) == Self.text("[SG*8800000015*0002*CR]"))
                #expect(board.command(query.id)?.status == .sent)
                device.send(Self.text("[SG*8800000015*0002*CR]"))
                #expect(await Poll.until { board.command(query.id)?.status == .done })
                #expect(board.command(query.id)?.result == "CR")
                #expect(context.stats.value("messages.command_reply") == 1)
            }
        }
    }
}
