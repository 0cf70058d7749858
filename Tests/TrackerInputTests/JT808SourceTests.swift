import DeviceCommands
import DeviceIntake
import GatewayCore
import GatewayTesting
import Locking
import Testing
@testable import TrackerInput

/// A JT/T 808 terminal for tests: builds its frames with an encoder of its own (header, escapes,
/// check code) and reads the server's.
struct TestTerminal {
    /// The 12 BCD digits of its phone field.
    var phone: String
    var serial: UInt16 = 0

    init(phone: String) { self.phone = phone }

    /// The next frame of message `id`; `split` numbers it as a packet.
    mutating func frame(_ id: UInt16, _ body: [UInt8], split: (total: UInt16, index: UInt16)? = nil, serial given: UInt16? = nil) -> [UInt8] {
        let serial: UInt16
        if let given { serial = given } else {
            self.serial &+= 1
            serial = self.serial
        }
        var data = Self.word(id) + Self.word(UInt16(body.count) | (split == nil ? 0 : 0x2000)) + bytes(hex: phone) + Self.word(serial)
        if let split { data += Self.word(split.total) + Self.word(split.index) }
        data += body
        data.append(data.reduce(0, ^))
        var out: [UInt8] = [0x7E]
        for byte in data {
            switch byte {
            case 0x7E: out += [0x7D, 0x02]
            case 0x7D: out += [0x7D, 0x01]
            default: out.append(byte)
            }
        }
        return out + [0x7E]
    }

    static func word(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    /// A 2013 registration: province, city, maker, model (20), terminal id (7), plate colour.
    mutating func register(terminalID: String = "T000001") -> [UInt8] {
        frame(0x0100, [0, 0, 0, 0] + Array("MAKER".utf8) + Array("MODEL".utf8) + [UInt8](repeating: 0, count: 15)
              + Array(terminalID.utf8.prefix(7)) + [0])
    }

    /// A location: positioned, ACC on, at `lat`/`lon`, GMT+8 time `bcd` (YYMMDDhhmmss).
    static func location(lat: Double, lon: Double, bcd: String, speedTenths: UInt16 = 0) -> [UInt8] {
        [0, 0, 0, 0, 0, 0, 0, 3] + dword(UInt32(lat * 1e6)) + dword(UInt32(lon * 1e6)) + word(12) + word(speedTenths) + word(90)
            + bytes(hex: bcd) + [0x31, 1, 9]
    }

    static func dword(_ value: UInt32) -> [UInt8] { word(UInt16(value >> 16)) + word(UInt16(value & 0xFFFF)) }

    /// A 0x0704 body of `locations` (type 0 normal, 1 stored while out of coverage).
    static func batch(_ locations: [[UInt8]], type: UInt8 = 0) -> [UInt8] {
        var body = word(UInt16(locations.count)) + [type]
        for l in locations { body += word(UInt16(l.count)) + l }
        return body
    }

    /// The server's next frame: message id, serial, body (checks the check code).
    static func read(_ client: LoopbackTCPClient, timeout: Duration = .seconds(10)) -> (id: UInt16, serial: UInt16, body: [UInt8])? {
        var raw: [UInt8] = []
        var started = false
        while true {
            let byte = client.read(count: 1, timeout: timeout)
            guard let b = byte.first else { return nil }
            if b == 0x7E {
                if started && !raw.isEmpty { break }
                started = true
                continue
            }
            if started { raw.append(b) }
        }
        var data: [UInt8] = []
        var k = 0
        while k < raw.count {
            if raw[k] == 0x7D, k + 1 < raw.count {
                data.append(raw[k + 1] == 0x01 ? 0x7D : 0x7E)
                k += 2
            } else {
                data.append(raw[k])
                k += 1
            }
        }
        guard data.count >= 13, data.dropLast().reduce(0, ^) == data.last else { return nil }
        return (UInt16(data[0]) << 8 | UInt16(data[1]), UInt16(data[10]) << 8 | UInt16(data[11]), Array(data[12..<(data.count - 1)]))
    }
}

/// Per-device state in memory that outlives a source (a restart keeps the storage).
final class MemoryStateStore: DeviceStateStore {
    let records = Locked<[String: DeviceStateRecord]>([:])
    let failWrites = Locked(false)
    var location: String { "memory" }

    func load(transform: String) throws -> [DeviceStateRecord] {
        records.withLock { Array($0.values.filter { $0.transform == transform }) }
    }

    func write(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void) {
        if failWrites.withLock({ $0 }) { return completion(DeviceStateStoreError.unavailable("disk on fire")) }
        records.withLock { r in
            for c in changes {
                let key = c.transform + "/" + c.device
                if c.state == nil { r[key] = nil } else { r[key] = DeviceStateRecord(transform: c.transform, device: c.device, format: c.format, state: c.state, updatedMilliseconds: 1) }
            }
        }
        completion(nil)
    }

    func close() {}
}

/// Runs a `jt808` source with `store` (and `commands`) on a free port until `body` returns.
func withJT808(_ json: String, store: (any DeviceStateStore)? = MemoryStateStore(), commands: (any CommandCenter)? = nil,
               output: SourceOutput, udp: Bool = false, _ body: (Int, ComponentContext) async throws -> Void) async throws {
    let port = LoopbackTCPServer.freePort(udp: udp)
    let c = try PluginOptions.valid(JT808SourcePlugin.self, json.replacingOccurrences(of: "PORT", with: "\(port)"))
    let plain = SourceConformance.makeContext(id: "jt")
    let context = ComponentContext(id: plain.id, kind: .source, logger: plain.logger, stats: plain.stats, clock: plain.clock, stateStore: store,
                                   commands: commands)
    let source = try JT808SourcePlugin.makeSource(c, context: context)
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

@Suite(.timeLimit(.minutes(1))) struct JT808SourceTests {
    static let strict = #"{ "type": "jt808", "listen": "127.0.0.1:PORT", "devices": { "13912345678": "bus-12" } }"#
    static let here = TestTerminal.location(lat: 22.5431, lon: 114.0579, bcd: "261205093000")

    /// Registers and authenticates `terminal` on `client`; returns the code.
    static func logIn(_ terminal: inout TestTerminal, _ client: LoopbackTCPClient) throws -> [UInt8] {
        client.send(terminal.register())
        let registered = try #require(TestTerminal.read(client))
        #expect(registered.id == 0x8100)
        #expect(Array(registered.body.prefix(3)) == TestTerminal.word(terminal.serial) + [0])
        let code = Array(registered.body.dropFirst(3))
        client.send(terminal.frame(0x0102, code))
        let authenticated = try #require(TestTerminal.read(client))
        #expect(authenticated.id == 0x8001)
        #expect(authenticated.body == TestTerminal.word(terminal.serial) + [0x01, 0x02, 0])
        return code
    }

    @Test func registersAuthenticatesAndAnswersPositionsOnlyOnceHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            let code = try Self.logIn(&terminal, client)
            #expect(code.count == 16)
            client.send(terminal.frame(0x0200, Self.here))
            #expect(await Poll.until { acks.positions.count == 1 })
            // A heartbeat is answered at once; the position only after the commit.
            client.send(terminal.frame(0x0002, []))
            let heartbeat = try #require(TestTerminal.read(client))
            #expect(heartbeat.body == TestTerminal.word(terminal.serial) + [0x00, 0x02, 0])
            #expect(client.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            let answer = try #require(TestTerminal.read(client))
            #expect(answer.id == 0x8001)
            #expect(answer.body == TestTerminal.word(terminal.serial - 1) + [0x02, 0x00, 0])
            // The server numbers its messages 0, 1, 2, 3 on the connection.
            #expect(heartbeat.serial == 2 && answer.serial == 3)
            let p = try #require(acks.positions.first)
            #expect(p.device == "bus-12")
            #expect(p.time == Timestamp(year: 2026, month: 12, day: 5, hour: 1, minute: 30))
            #expect(abs((p.latitude ?? 0) - 22.5431) < 1e-6 && abs((p.longitude ?? 0) - 114.0579) < 1e-6)
            #expect(p.satellites == 9 && p.mode == .threeD)
            #expect(context.stats.value("admissions.registered") == 1 && context.stats.value("admissions.authenticated") == 1)
            #expect(context.stats.value("messages.0x0200") == 1)
        }
    }

    @Test func positionsBeforeAuthenticationCloseTheConnectionUnanswered() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.frame(0x0200, Self.here))
            #expect(client.waitForClose())
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("frames.unauthenticated") == 1)
        }
    }

    @Test func aWrongCodeIsRefusedAndTheConnectionTakesNoPositions() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            let other = try LoopbackTCPClient(port: port)
            other.send(terminal.frame(0x0102, Array("WRONG".utf8)))
            let refused = try #require(TestTerminal.read(other))
            #expect(refused.id == 0x8001 && refused.body.last == 1)
            other.send(terminal.frame(0x0200, Self.here))
            #expect(other.waitForClose())
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("admissions.refused_code") == 1)
        }
    }

    @Test func anUnknownTerminalIsRefusedWithNoSuchTerminal() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = TestTerminal(phone: "013900000000")
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.register())
            let answer = try #require(TestTerminal.read(client))
            #expect(answer.id == 0x8100 && answer.body == TestTerminal.word(terminal.serial) + [4])
            #expect(client.waitForClose())
            #expect(context.stats.value("devices.unknown") == 1)
        }
    }

    @Test func aTerminalIsRecognisedAfterARestartAndAnotherOneUnderItsNumberIsNot() async throws {
        let store = MemoryStateStore()
        var terminal = TestTerminal(phone: "013912345678")
        var code: [UInt8] = []
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { port, _ in
            code = try Self.logIn(&terminal, try LoopbackTCPClient(port: port))
        }
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, store: store, output: acks.output) { port, context in
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.frame(0x0102, code))
            let answer = try #require(TestTerminal.read(client))
            #expect(answer.body.last == 0, "the code issued before the restart is accepted")
            client.send(terminal.frame(0x0200, Self.here))
            #expect(await Poll.until { acks.positions.count == 1 })
            // The same terminal registering again gets its code again; another terminal under
            // the same number is told it is already registered.
            let again = try LoopbackTCPClient(port: port)
            again.send(terminal.register())
            #expect(try #require(TestTerminal.read(again)).body == TestTerminal.word(terminal.serial) + [0] + code)
            again.send(terminal.register(terminalID: "OTHER01"))
            #expect(try #require(TestTerminal.read(again)).body == TestTerminal.word(terminal.serial) + [3])
            #expect(context.stats.value("admissions.refused_already_registered") == 1)
        }
    }

    @Test func aRegistrationTheStoreCannotKeepIsNotAnswered() async throws {
        let store = MemoryStateStore()
        store.failWrites.withLock { $0 = true }
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { port, context in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.register())
            #expect(await Poll.until { context.stats.value("admissions.unavailable") == 1 })
            #expect(client.readSome(timeout: .milliseconds(200)) == [])
            // Once the store works again, the retry is answered.
            store.failWrites.withLock { $0 = false }
            client.send(terminal.register())
            #expect(try #require(TestTerminal.read(client)).id == 0x8100)
        }
    }

    @Test func authAnyTakesTerminalsThatNeverAuthenticate() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(#"{ "type": "jt808", "listen": "127.0.0.1:PORT", "unknown_devices": "accept", "auth": "any" }"#,
                            output: acks.output) { port, _ in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.frame(0x0200, Self.here))
            #expect(await Poll.until { acks.positions.count == 1 })
            acks.acknowledge()
            #expect(try #require(TestTerminal.read(client)).id == 0x8001)
            #expect(acks.positions.first?.device == "13912345678")
        }
    }

    @Test func authPhoneIssuesAndChecksThePhoneDigits() async throws {
        try await withJT808(#"{ "type": "jt808", "listen": "127.0.0.1:PORT", "unknown_devices": "accept", "auth": "phone" }"#,
                            store: nil, output: HeldAcknowledgements().output) { port, _ in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            #expect(try Self.logIn(&terminal, client) == Array("013912345678".utf8))
        }
    }

    @Test func aSplitBatchArrivingOutOfOrderIsOnePositionSetAnsweredOnce() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            let fixes = (0..<6).map { TestTerminal.location(lat: 22.5 + Double($0) / 1000, lon: 114, bcd: "26120509300\($0)") }
            let body = TestTerminal.batch(fixes, type: 1)
            let third = body.count / 3
            let pieces = [Array(body[..<third]), Array(body[third..<(2 * third)]), Array(body[(2 * third)...])]
            let first = terminal.serial &+ 1
            let frames = (0..<3).map { terminal.frame(0x0704, pieces[$0], split: (3, UInt16($0 + 1)), serial: first &+ UInt16($0)) }
            terminal.serial = first &+ 2
            client.send(frames[2] + frames[0])
            #expect(await Poll.until { context.stats.value("messages.split_packet") == 2 })
            #expect(acks.positions.isEmpty)
            client.send(frames[1])
            #expect(await Poll.until { acks.positions.count == 6 })
            #expect(acks.positions.allSatisfy { $0.attributes["late"] == "true" })
            #expect(acks.positions.map { $0.latitude.map { ($0 * 1000).rounded() } } == (0..<6).map { 22_500 + Double($0) })
            acks.acknowledge()
            // A busy machine may leave the connection quiet for a second between the packets: the
            // 0x8003 asking for the missing one is then right, and skipped here.
            var answers: [[UInt8]] = []
            while let frame = TestTerminal.read(client, timeout: answers.isEmpty ? .seconds(10) : .milliseconds(500)) {
                if frame.id == 0x8001 { answers.append(frame.body) }
            }
            #expect(answers == [TestTerminal.word(first) + [0x07, 0x04, 0]], "answered once")
            // Reassembly counters are reported when the connection has been quiet for a second.
            #expect(await Poll.until { context.stats.value("split.completed") == 1 })
        }
    }

    @Test func aMissingPacketIsAskedForOnceTheTerminalIsQuiet() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, _ in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            let body = TestTerminal.batch([Self.here, Self.here])
            let half = body.count / 2
            let first = terminal.serial &+ 1
            let one = terminal.frame(0x0704, Array(body[..<half]), split: (2, 1), serial: first)
            let two = terminal.frame(0x0704, Array(body[half...]), split: (2, 2), serial: first &+ 1)
            client.send(two)
            // 0x8003: the message's serial, one packet missing, its index 1.
            let request = try #require(TestTerminal.read(client))
            #expect(request.id == 0x8003)
            #expect(request.body == TestTerminal.word(first) + [1] + TestTerminal.word(1))
            client.send(one)
            #expect(await Poll.until { acks.positions.count == 2 })
        }
    }

    @Test func aBadCheckCodeIsNeverAnsweredAndTheNextFrameIs() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            var broken = terminal.frame(0x0200, Self.here)
            broken[broken.count - 2] ^= 0x01
            client.send(broken + terminal.frame(0x0002, []))
            let answer = try #require(TestTerminal.read(client))
            #expect(answer.body == TestTerminal.word(terminal.serial) + [0x00, 0x02, 0])
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("frames.bad.checksum") == 1)
        }
    }

    @Test func overUDPOnlyRegisteredTerminalsAreTaken() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(#"{ "type": "jt808", "udp": true, "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                            output: acks.output, udp: true) { port, context in
            var terminal = TestTerminal(phone: "013912345678")
            let device = try LoopbackUDPSender()
            // Not registered: unanswered, kept by the terminal (sent until the socket is bound).
            let early = terminal.frame(0x0200, Self.here)
            #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                if context.stats.value("frames.unauthenticated") == 0 { device.send(early, to: port) }
                return context.stats.value("frames.unauthenticated") >= 1
            })
            #expect(acks.positions.isEmpty)
            device.send(terminal.register(), to: port)
            let registered = try #require(device.receive())
            #expect(registered[1...2] == [0x81, 0x00])
            device.send(terminal.frame(0x0200, Self.here), to: port)
            #expect(await Poll.until { acks.positions.count == 1 })
            acks.acknowledge()
            let answer = try #require(device.receive())
            #expect(answer[1...2] == [0x80, 0x01])
        }
    }

    @Test func aCommandWaitsForTheTerminalGoesWhenItAuthenticatesAndIsDoneWhenItAnswers() async throws {
        let board = try CommandBoard(store: MemoryCommandStore(), clock: SystemClock(), logger: Logger(label: "commands", handler: SilentLogHandler()))
        defer { board.close() }
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, commands: board, output: acks.output) { port, context in
            // bus-12 is in devices: known while offline.
            #expect(await Poll.until { (try? board.submit(CommandRequest(device: "bus-12", type: .setInterval, parameters: ["interval": "20s"], submittedBy: "ops"))) != nil })
            let id = try #require(board.commands(device: "bus-12").first?.id)
            #expect(board.command(id)?.status == .queued)
            var terminal = TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            // 0x8103: one parameter, 0x0029 (default reporting interval) = 20 s; the server's third message.
            let command = try #require(TestTerminal.read(client))
            #expect(command.id == 0x8103)
            #expect(command.serial == 2)
            #expect(command.body == [1, 0, 0, 0, 0x29, 4, 0, 0, 0, 20])
            #expect(board.command(id)?.status == .sent)
            client.send(terminal.frame(0x0001, TestTerminal.word(command.serial) + [0x81, 0x03, 0]))
            #expect(await Poll.until { board.command(id)?.status == .done })
            #expect(board.command(id)?.result == "success")
            // Each status change went through the source as an event, and was counted.
            #expect(await Poll.until { acks.positions.compactMap { $0.event?.status } == ["queued", "sent", "done"] })
            #expect(acks.positions.allSatisfy { $0.event?.kind == .command && $0.device == "bus-12" && $0.attributes["command_id"] == id })
            #expect(context.stats.value("commands.done") == 1 && context.stats.value("commands.written") == 1)
        }
    }

    @Test func optionsAreCheckedWithTheirPaths() throws {
        let (_, problems) = try PluginOptions.read(JT808SourcePlugin.self,
            #"{ "unknown_devices": "accept", "timezone": "Asia/Shanghai", "datum": "EPSG:32650", "auth": "sometimes" }"#)
        #expect(Set(problems.map(\.path)) == ["sources.under_test.timezone", "sources.under_test.datum", "sources.under_test.auth"])
    }
}
