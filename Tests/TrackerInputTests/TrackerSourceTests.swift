import DeviceCommands
import DeviceIntake
import GatewayCore
import GatewayTesting
import Synchronization
import Testing
import TrackerInput

/// Runs a plugin's source `id` on a free port until `body` returns, with `store`, `commands` and `clock` in its context.
func withSource<P: SourcePlugin>(_ plugin: P.Type, _ json: String, id: String = "trackers", output: SourceOutput, udp: Bool = false,
                                 store: (any DeviceStateStore)? = nil, commands: (any CommandCenter)? = nil,
                                 clock: any GatewayClock = SystemClock(),
                                 _ body: (Int, ComponentContext) async throws -> Void) async throws {
    let port = LoopbackTCPServer.freePort(udp: udp)
    let c = try PluginOptions.valid(plugin, json.replacingOccurrences(of: "PORT", with: "\(port)"))
    let plain = SourceConformance.makeContext(id: id, clock: clock)
    let context = ComponentContext(id: plain.id, kind: .source, logger: plain.logger, stats: plain.stats, clock: plain.clock,
                                   stateStore: store, commands: commands)
    let source = try P.makeSource(c, context: context)
    let task = Task { try await source.run(output: output) }
    defer { task.cancel() }
    if !udp {
        #expect(await Poll.until { (try? LoopbackTCPClient(port: port)) != nil })
        _ = await Poll.until { context.stats.value("connections.accepted") >= 1 && context.stats.value("connections.open") == 0 }
    }
    try await body(port, context)
    task.cancel()
    _ = await task.result
}

@Suite(.timeLimit(.minutes(1))) struct TeltonikaSourceTests {
    static let imeiFrame = bytes(hex: "000F313233343536373839303132333435")
    /// Two Codec 8 Extended records (Traccar's TeltonikaProtocolDecoderTest).
    static let twoRecords = bytes(hex: "000000000000010e8e020000019769de9f9800015299f718b278040018007708000000000013000b00ef0100f00000150500c80000450100010100b30000020000030000b401017c00000500b5001a00b6000c004238d40043000000440000000200f10000539b00100000efc70001004e000000000000000000000000019769de5d3b00015299f718b27804001800770800002c350001000000000000000000012c3500700124050f4e65766572615f33000000000000000f067cd9f4110c4006020c8f0701340e020c1c24050f4e65766572615f31000000000000000f067cd9f411334606020c380701340e020c2624050f4e65766572615f32000000000000000f067cd9f411464706020c240701360e020c26020000a8b0")

    @Test func answersTheRecordCountOnlyOnceTheRecordsAreHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(TeltonikaSourcePlugin.self, #"{ "type": "teltonika", "listen": "127.0.0.1:PORT", "devices": { "123456789012345": "truck-7" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.imeiFrame)
            #expect(device.read(count: 1) == [0x01])
            device.send(Self.twoRecords)
            #expect(await Poll.until { acks.positions.count == 2 })
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            #expect(device.read(count: 4) == [0, 0, 0, 2])
            let p = try #require(acks.positions.first)
            #expect(p.device == "truck-7")
            #expect(p.source == "trackers")
            #expect(p.id == "trackers-truck-7-\(try #require(p.time).milliseconds)")
            #expect(abs((p.latitude ?? 0) - 41.4349316) < 1e-7)
            #expect(abs((p.longitude ?? 0) - 2.2190583) < 1e-7)
            #expect(p.time == Timestamp(year: 2025, month: 6, day: 13, hour: 15, minute: 18, second: 7))
            #expect(context.stats.value("devices.identified") == 1)
        }
    }

    @Test func refusesAnUnknownImeiWithZeroAndCloses() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(TeltonikaSourcePlugin.self, #"{ "type": "teltonika", "listen": "127.0.0.1:PORT", "devices": { "1": "x" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.imeiFrame + Self.twoRecords)
            #expect(device.read(count: 1) == [0x00])
            #expect(device.waitForClose())
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("devices.unknown") == 1)
        }
    }

    @Test func neverAnswersAFrameWithABadChecksum() async throws {
        let acks = HeldAcknowledgements()
        var broken = Self.twoRecords
        broken[broken.count - 1] ^= 0xFF
        try await withSource(TeltonikaSourcePlugin.self, #"{ "type": "teltonika", "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.imeiFrame)
            #expect(device.read(count: 1) == [0x01])
            device.send(broken)
            // Teltonika has no marker to find the next frame by: the device reconnects and resends.
            #expect(device.waitForClose())
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("frames.bad.checksum") == 1)
        }
    }

    @Test func refusesAHugeLengthFieldAtOnce() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(TeltonikaSourcePlugin.self, #"{ "type": "teltonika", "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.imeiFrame)
            #expect(device.read(count: 1) == [0x01])
            device.send([0, 0, 0, 0, 0x40, 0, 0, 0, 0x08])
            #expect(device.waitForClose())
            #expect(context.stats.value("frames.bad.too_large") == 1)
        }
    }

    @Test func answersUDPDatagramsToTheirSenderOnceHandled() async throws {
        let acks = HeldAcknowledgements()
        let packet = bytes(hex: "0049cafe0122000f33353734353430373237313339373508010000015d3766f6a800003eef961ec6215e0063006d09003100070401000200f001c8000242381c18003201c7000000e10001")
        try await withSource(TeltonikaSourcePlugin.self, #"{ "type": "teltonika", "udp": true, "listen": "127.0.0.1:PORT", "devices": { "357454072713975": "van" } }"#,
                             output: acks.output, udp: true) { port, _ in
            let device = try LoopbackUDPSender()
            #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                if acks.positions.isEmpty { device.send(packet, to: port) }
                return !acks.positions.isEmpty
            })
            while device.receive(timeout: .milliseconds(50)) != nil {}
            acks.acknowledge()
            // Length 5, the packet id echoed, 01, the AVL packet id, one record accepted.
            #expect(device.receive() == [0x00, 0x05, 0xca, 0xfe, 0x01, 0x22, 0x01])
            #expect(acks.positions.first?.device == "van")
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct GT06SourceTests {
    static let login = bytes(hex: "78780D01086471700328358100093F040D0A")
    /// A 0x12 GPS/LBS frame, serial 0576 (Traccar's Gt06ProtocolDecoderTest).
    static let position = bytes(hex: "787823120f081b121d37cb01c8e2cc08afd3c020d50201940701d600a1190041ee100576d1470d0a")
    /// A 0x13 status frame (heartbeat), serial 0040.
    static let heartbeat = bytes(hex: "7878131340b2fa000201040000000000011c00400e550d0a")

    @Test func answersTheLoginAndHeartbeatsAtOnceAndThePositionOnceHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GT06SourcePlugin.self, #"{ "type": "gt06", "listen": "127.0.0.1:PORT", "devices": { "864717003283581": "bike" } }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.login)
            #expect(device.read(count: 10) == bytes(hex: "78780501000955940d0a"))
            device.send(Self.position)
            #expect(await Poll.until { acks.positions.count == 1 })
            device.send(Self.heartbeat)
            #expect(device.read(count: 10) == bytes(hex: "787805130040ba7c0d0a"))
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            #expect(device.read(count: 10) == bytes(hex: "787805120576caad0d0a"))
            let p = try #require(acks.positions.first)
            #expect(p.device == "bike")
            #expect(abs((p.latitude ?? 0) - 16.634709) < 1e-5)
            #expect(abs((p.longitude ?? 0) - 80.967076) < 1e-5)
            #expect(p.time == Timestamp(year: 2015, month: 8, day: 27, hour: 18, minute: 29, second: 55))
            #expect(await Poll.until { context.stats.value("acks.sent") == 1 })
        }
    }

    @Test func anEngineStopGoesAsTheVectorsBytesAndTheDevicesStringIsItsResult() async throws {
        let board = try CommandBoard(store: MemoryCommandStore(), clock: .system, logger: Logger(label: "c", handler: SilentLogHandler()))
        defer { board.close() }
        let acks = HeldAcknowledgements()
        try await withSource(GT06SourcePlugin.self, #"{ "type": "gt06", "listen": "127.0.0.1:PORT", "devices": { "864717003283581": "bike" } }"#,
                             output: acks.output, commands: board) { port, _ in
            let command = try board.submit(CommandRequest(device: "bike", type: .engineStop, submittedBy: "ops"))
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.login)
            #expect(device.read(count: 10) == bytes(hex: "78780501000955940d0a"))
            // gt06-commands.txt C1: 0x80, server flag 0, "Relay,1#", serial 0.
            #expect(device.read(count: 23) == bytes(hex: "787812800c0000000052656c61792c312300009dee0d0a"))
            #expect(board.command(command.id)?.status == .sent)
            // The device's 0x15 (gt06-commands.txt A7): acknowledged at once, and the command's result.
            device.send(bytes(hex: "78782d152500000000437574206f666620746865206675656c20737570706c793a2053756363657373210002013b898a0d0a"))
            #expect(device.read(count: 10) == bytes(hex: "78780515013bb8290d0a"))
            #expect(await Poll.until { board.command(command.id)?.status == .done })
            #expect(board.command(command.id)?.result == "Cut off the fuel supply: Success!")
        }
    }

    @Test func appliesTheDevicesTimeZone() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GT06SourcePlugin.self, #"{ "type": "gt06", "listen": "127.0.0.1:PORT", "unknown_devices": "accept", "timezone": "+08:00" }"#,
                             output: acks.output) { port, _ in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.login + Self.position)
            #expect(await Poll.until { acks.positions.count == 1 })
            #expect(acks.positions.first?.time == Timestamp(year: 2015, month: 8, day: 27, hour: 10, minute: 29, second: 55))
            #expect(acks.positions.first?.device == "864717003283581")
        }
    }

    @Test func skipsAFrameWithABadChecksumAndReadsOn() async throws {
        let acks = HeldAcknowledgements()
        var broken = Self.position
        broken[broken.count - 4] ^= 0xFF
        try await withSource(GT06SourcePlugin.self, #"{ "type": "gt06", "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.login)
            #expect(device.read(count: 10) == bytes(hex: "78780501000955940d0a"))
            device.send(broken + Self.heartbeat)
            #expect(device.read(count: 10) == bytes(hex: "787805130040ba7c0d0a"))
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("frames.bad.checksum") == 1)
        }
    }

    @Test func closesAConnectionThatSendsPositionsBeforeItsLogin() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(GT06SourcePlugin.self, #"{ "type": "gt06", "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                             output: acks.output) { port, context in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.position)
            #expect(device.waitForClose())
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("frames.unidentified") == 1)
        }
    }

    @Test func reportsABadTimeZoneWithItsPath() throws {
        let (_, problems) = try PluginOptions.read(GT06SourcePlugin.self, #"{ "type": "gt06", "unknown_devices": "accept", "timezone": "Asia/Shanghai" }"#)
        #expect(problems.map(\.path) == ["sources.under_test.timezone"])
    }
}

@Suite(.timeLimit(.minutes(1))) struct H02SourceTests {
    static let v1 = "*HQ,4970105243,V1,104000,A,2235.1777,N,11357.8913,E,000.27,235,130721,FFFFFBFF,460,11,d18e105,7752,6#"
    static let v6 = "*HQ,3177718238,V6,002926,V,3514.4088,N,9733.2842,W,0.00,0.00,151222,FFF7FBFF,310,260,32936,13641,8944501311217563382F,#"

    @Test func namesTheDeviceFromEachSentenceAndAnswersV1OnceHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withSource(H02SourcePlugin.self, #"{ "type": "h02", "listen": "127.0.0.1:PORT", "devices": { "4970105243": "scooter" } }"#,
                             output: acks.output) { port, _ in
            let device = try LoopbackTCPClient(port: port)
            device.send(Self.v1)
            #expect(await Poll.until { acks.positions.count == 1 })
            #expect(device.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            let answer = String(decoding: device.read(count: 36), as: UTF8.self)
            #expect(answer.hasPrefix("*HQ,4970105243,V4,V1,") && answer.hasSuffix("#"), "\(answer)")
            let p = try #require(acks.positions.first)
            #expect(p.device == "scooter")
            #expect(abs((p.latitude ?? 0) - 22.586295) < 1e-5)
            #expect(abs((p.longitude ?? 0) - 113.964855) < 1e-5)
            #expect(p.time == Timestamp(year: 2021, month: 7, day: 13, hour: 10, minute: 40))
        }
    }

    @Test func answersOtherPositionsOnlyWithAck() async throws {
        for ack in [false, true] {
            let acks = HeldAcknowledgements()
            try await withSource(H02SourcePlugin.self, #"{ "type": "h02", "listen": "127.0.0.1:PORT", "unknown_devices": "accept", "ack": \#(ack) }"#,
                                 output: acks.output) { port, _ in
                let device = try LoopbackTCPClient(port: port)
                device.send(Self.v6)
                #expect(await Poll.until { acks.positions.count == 1 })
                acks.acknowledge()
                let answer = String(decoding: device.read(count: 24, timeout: .seconds(ack ? 10 : 1)), as: UTF8.self)
                #expect(answer.hasPrefix("*HQ,3177718238,R12,") == ack, "ack \(ack): \(answer)")
                #expect(acks.positions.first?.mode == .noFix)
            }
        }
    }
}

@Suite struct TrackerValidationTests {
    @Test func validateWarnsOfAPortAnotherProgramHolds() throws {
        let holder = LoopbackTCPServer { _ in [] }
        try holder.start()
        defer { holder.stop() }
        let held = try PluginOptions.valid(GT06SourcePlugin.self, #"{ "listen": "127.0.0.1:\#(holder.port)", "unknown_devices": "accept" }"#)
        let findings = GT06SourcePlugin.checkEnvironment(held, context: EnvironmentContext(path: "sources.gt"))
        #expect(findings.map(\.path) == ["sources.gt.listen"])
        #expect(findings.first?.severity == .warning)
        #expect(findings.first?.message.contains("Address already in use") == true, "\(findings)")
        let free = try PluginOptions.valid(GT06SourcePlugin.self, #"{ "listen": "127.0.0.1:\#(LoopbackTCPServer.freePort())", "unknown_devices": "accept" }"#)
        #expect(GT06SourcePlugin.checkEnvironment(free, context: EnvironmentContext(path: "sources.gt")).isEmpty)
    }

    @Test func validateReportsAnUnreadableDevicesFileAsAnError() throws {
        let c = try PluginOptions.valid(TeltonikaSourcePlugin.self, #"{ "devices": "/nonexistent/devices.json" }"#)
        let findings = TeltonikaSourcePlugin.checkEnvironment(c, context: EnvironmentContext(path: "sources.fmb"))
        #expect(findings.first?.path == "sources.fmb.devices")
        #expect(findings.first?.severity == .error)
    }
}

