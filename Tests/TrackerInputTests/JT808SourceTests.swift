import DeviceCommands
import DeviceIntake
import GatewayCore
import GatewayTesting
import Locking
import Testing
@testable import TrackerInput

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

/// Runs a `jt808` source with `store` (and `commands`, `clock`) on a free port until `body` returns.
func withJT808(_ json: String, store: (any DeviceStateStore)? = MemoryStateStore(), commands: (any CommandCenter)? = nil,
               clock: any GatewayClock = SystemClock(), output: SourceOutput, udp: Bool = false,
               _ body: (Int, ComponentContext) async throws -> Void) async throws {
    try await withSource(JT808SourcePlugin.self, json, id: "jt", output: output, udp: udp, store: store, commands: commands, clock: clock, body)
}

@Suite(.timeLimit(.minutes(1))) struct JT808SourceTests {
    static let strict = #"{ "type": "jt808", "listen": "127.0.0.1:PORT", "devices": { "13912345678": "bus-12" } }"#
    static let here = JT808TestTerminal.location(lat: 22.5431, lon: 114.0579, bcd: "261205093000")

    /// Registers and authenticates `terminal` on `client`; returns the code.
    static func logIn(_ terminal: inout JT808TestTerminal, _ client: LoopbackTCPClient) throws -> [UInt8] {
        client.send(terminal.register())
        let registered = try #require(JT808TestTerminal.read(client))
        #expect(registered.id == 0x8100)
        #expect(Array(registered.body.prefix(3)) == JT808TestTerminal.word(terminal.serial) + [0])
        let code = Array(registered.body.dropFirst(3))
        client.send(terminal.frame(0x0102, code))
        let authenticated = try #require(JT808TestTerminal.read(client))
        #expect(authenticated.id == 0x8001)
        #expect(authenticated.body == JT808TestTerminal.word(terminal.serial) + [0x01, 0x02, 0])
        return code
    }

    @Test func registersAuthenticatesAndAnswersPositionsOnlyOnceHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            let code = try Self.logIn(&terminal, client)
            #expect(code.count == 16)
            client.send(terminal.frame(0x0200, Self.here))
            #expect(await Poll.until { acks.positions.count == 1 })
            // A heartbeat is answered at once; the position only after the commit.
            client.send(terminal.frame(0x0002, []))
            let heartbeat = try #require(JT808TestTerminal.read(client))
            #expect(heartbeat.body == JT808TestTerminal.word(terminal.serial) + [0x00, 0x02, 0])
            #expect(client.readSome(timeout: .milliseconds(300)) == [])
            acks.acknowledge()
            let answer = try #require(JT808TestTerminal.read(client))
            #expect(answer.id == 0x8001)
            #expect(answer.body == JT808TestTerminal.word(terminal.serial - 1) + [0x02, 0x00, 0])
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
            var terminal = JT808TestTerminal(phone: "013912345678")
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
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            let other = try LoopbackTCPClient(port: port)
            other.send(terminal.frame(0x0102, Array("WRONG".utf8)))
            let refused = try #require(JT808TestTerminal.read(other))
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
            var terminal = JT808TestTerminal(phone: "013900000000")
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.register())
            let answer = try #require(JT808TestTerminal.read(client))
            #expect(answer.id == 0x8100 && answer.body == JT808TestTerminal.word(terminal.serial) + [4])
            #expect(client.waitForClose())
            #expect(context.stats.value("devices.unknown") == 1)
        }
    }

    @Test func aTerminalIsRecognisedAfterARestartAndAnotherOneUnderItsNumberIsNot() async throws {
        let store = MemoryStateStore()
        var terminal = JT808TestTerminal(phone: "013912345678")
        var code: [UInt8] = []
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { port, _ in
            code = try Self.logIn(&terminal, try LoopbackTCPClient(port: port))
        }
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, store: store, output: acks.output) { port, context in
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.frame(0x0102, code))
            let answer = try #require(JT808TestTerminal.read(client))
            #expect(answer.body.last == 0, "the code issued before the restart is accepted")
            client.send(terminal.frame(0x0200, Self.here))
            #expect(await Poll.until { acks.positions.count == 1 })
            // The same terminal registering again gets its code again; another terminal under
            // the same number is told it is already registered.
            let again = try LoopbackTCPClient(port: port)
            again.send(terminal.register())
            #expect(try #require(JT808TestTerminal.read(again)).body == JT808TestTerminal.word(terminal.serial) + [0] + code)
            again.send(terminal.register(terminalID: "OTHER01"))
            #expect(try #require(JT808TestTerminal.read(again)).body == JT808TestTerminal.word(terminal.serial) + [3])
            #expect(context.stats.value("admissions.refused_already_registered") == 1)
        }
    }

    @Test func aRegistrationTheStoreCannotKeepIsNotAnswered() async throws {
        let store = MemoryStateStore()
        store.failWrites.withLock { $0 = true }
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.register())
            #expect(await Poll.until { context.stats.value("admissions.unavailable") == 1 })
            #expect(client.readSome(timeout: .milliseconds(200)) == [])
            // Once the store works again, the retry is answered.
            store.failWrites.withLock { $0 = false }
            client.send(terminal.register())
            #expect(try #require(JT808TestTerminal.read(client)).id == 0x8100)
        }
    }

    @Test func authAnyTakesTerminalsThatNeverAuthenticate() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(#"{ "type": "jt808", "listen": "127.0.0.1:PORT", "unknown_devices": "accept", "auth": "any" }"#,
                            output: acks.output) { port, _ in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            client.send(terminal.frame(0x0200, Self.here))
            #expect(await Poll.until { acks.positions.count == 1 })
            acks.acknowledge()
            #expect(try #require(JT808TestTerminal.read(client)).id == 0x8001)
            #expect(acks.positions.first?.device == "13912345678")
        }
    }

    @Test func authPhoneIssuesAndChecksThePhoneDigits() async throws {
        try await withJT808(#"{ "type": "jt808", "listen": "127.0.0.1:PORT", "unknown_devices": "accept", "auth": "phone" }"#,
                            store: nil, output: HeldAcknowledgements().output) { port, _ in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            #expect(try Self.logIn(&terminal, client) == Array("013912345678".utf8))
        }
    }

    @Test func aSplitBatchArrivingOutOfOrderIsOnePositionSetAnsweredOnce() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            let fixes = (0..<6).map { JT808TestTerminal.location(lat: 22.5 + Double($0) / 1000, lon: 114, bcd: "26120509300\($0)") }
            let body = JT808TestTerminal.batch(fixes, type: 1)
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
            while let frame = JT808TestTerminal.read(client, timeout: answers.isEmpty ? .seconds(10) : .milliseconds(500)) {
                if frame.id == 0x8001 { answers.append(frame.body) }
            }
            #expect(answers == [JT808TestTerminal.word(first) + [0x07, 0x04, 0]], "answered once")
            // Reassembly counters are reported when the connection has been quiet for a second.
            #expect(await Poll.until { context.stats.value("split.completed") == 1 })
        }
    }

    @Test func aMissingPacketIsAskedForOnceTheTerminalIsQuiet() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, _ in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            let body = JT808TestTerminal.batch([Self.here, Self.here])
            let half = body.count / 2
            let first = terminal.serial &+ 1
            let one = terminal.frame(0x0704, Array(body[..<half]), split: (2, 1), serial: first)
            let two = terminal.frame(0x0704, Array(body[half...]), split: (2, 2), serial: first &+ 1)
            client.send(two)
            // 0x8003: the message's serial, one packet missing, its index 1.
            let request = try #require(JT808TestTerminal.read(client))
            #expect(request.id == 0x8003)
            #expect(request.body == JT808TestTerminal.word(first) + [1] + JT808TestTerminal.word(1))
            client.send(one)
            #expect(await Poll.until { acks.positions.count == 2 })
        }
    }

    @Test func aBadCheckCodeIsNeverAnsweredAndTheNextFrameIs() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            var broken = terminal.frame(0x0200, Self.here)
            broken[broken.count - 2] ^= 0x01
            client.send(broken + terminal.frame(0x0002, []))
            let answer = try #require(JT808TestTerminal.read(client))
            #expect(answer.body == JT808TestTerminal.word(terminal.serial) + [0x00, 0x02, 0])
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("frames.bad.checksum") == 1)
        }
    }

    @Test func overUDPOnlyRegisteredTerminalsAreTaken() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(#"{ "type": "jt808", "udp": true, "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                            output: acks.output, udp: true) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
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
        let board = try CommandBoard(store: MemoryCommandStore(), clock: .system, logger: Logger(label: "commands", handler: SilentLogHandler()))
        defer { board.close() }
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, commands: board, output: acks.output) { port, context in
            // bus-12 is in devices: known while offline.
            #expect(await Poll.until { (try? board.submit(CommandRequest(device: "bus-12", type: .setInterval, parameters: ["interval": "20s"], submittedBy: "ops"))) != nil })
            let id = try #require(board.commands(device: "bus-12").first?.id)
            #expect(board.command(id)?.status == .queued)
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            // 0x8103: one parameter, 0x0029 (default reporting interval) = 20 s; the server's third message.
            let command = try #require(JT808TestTerminal.read(client))
            #expect(command.id == 0x8103)
            #expect(command.serial == 2)
            #expect(command.body == [1, 0, 0, 0, 0x29, 4, 0, 0, 0, 20])
            #expect(board.command(id)?.status == .sent)
            client.send(terminal.frame(0x0001, JT808TestTerminal.word(command.serial) + [0x81, 0x03, 0]))
            #expect(await Poll.until { board.command(id)?.status == .done })
            #expect(board.command(id)?.result == "success")
            // Each status change went through the source as an event, and was counted.
            #expect(await Poll.until { acks.positions.compactMap { $0.event?.status } == ["queued", "sent", "done"] })
            #expect(acks.positions.allSatisfy { $0.event?.kind == .command && $0.device == "bus-12" && $0.attributes["command_id"] == id })
            #expect(context.stats.value("commands.done") == 1 && context.stats.value("commands.written") == 1)
        }
    }

    /// Reads the server's frames until one of message `id` (others, such as a 0x8003, are skipped).
    static func read(_ id: UInt16, from client: LoopbackTCPClient) -> (id: UInt16, serial: UInt16, body: [UInt8])? {
        while let frame = JT808TestTerminal.read(client) {
            if frame.id == id { return frame }
        }
        return nil
    }

    /// `body` cut into `total` packets with serials from `first`.
    static func packets(_ terminal: inout JT808TestTerminal, _ id: UInt16, _ body: [UInt8], total: Int, first: UInt16) -> [[UInt8]] {
        let size = (body.count + total - 1) / total
        return (0..<total).map { k in
            terminal.frame(id, Array(body[(k * size)..<min(body.count, (k + 1) * size)]), split: (UInt16(total), UInt16(k + 1)), serial: first &+ UInt16(k))
        }
    }

    // MARK: - Deregistration

    @Test func aDeregistrationFromAConnectionNotAuthenticatedAsTheTerminalForgetsNothing() async throws {
        let store = MemoryStateStore()
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let code = try Self.logIn(&terminal, try LoopbackTCPClient(port: port))
            // Someone else, never authenticated, who knows only the terminal's number.
            var stranger = JT808TestTerminal(phone: "013912345678")
            let other = try LoopbackTCPClient(port: port)
            other.send(stranger.frame(0x0003, []))
            let refused = try #require(JT808TestTerminal.read(other))
            #expect(refused.id == 0x8001 && refused.body == JT808TestTerminal.word(stranger.serial) + [0x00, 0x03, 1])
            #expect(context.stats.value("admissions.refused_unauthenticated") == 1)
            #expect(context.stats.value("admissions.deregistered") == 0)
            #expect(store.records.withLock { $0.count } == 1)
            // The terminal authenticates with its code on a new connection.
            let again = try LoopbackTCPClient(port: port)
            again.send(terminal.frame(0x0102, code))
            #expect(try #require(JT808TestTerminal.read(again)).body.last == 0, "the stranger's 0x0003 forgot the terminal's code")
        }
    }

    @Test func aTerminalDeregistersOnTheConnectionItAuthenticatedOn() async throws {
        let store = MemoryStateStore()
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            let code = try Self.logIn(&terminal, client)
            client.send(terminal.frame(0x0003, []))
            #expect(try #require(JT808TestTerminal.read(client)).body == JT808TestTerminal.word(terminal.serial) + [0x00, 0x03, 0])
            #expect(context.stats.value("admissions.deregistered") == 1)
            #expect(await Poll.until { store.records.withLock { $0.isEmpty } })
            let again = try LoopbackTCPClient(port: port)
            again.send(terminal.frame(0x0102, code))
            #expect(try #require(JT808TestTerminal.read(again)).body.last == 1, "its code is forgotten")
        }
    }

    /// Over UDP nothing says who sent a datagram: a deregistration is refused (result 1) unless
    /// `auth` is `any`, and the terminal's positions are still taken.
    @Test func overUDPADeregistrationIsRefused() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(#"{ "type": "jt808", "udp": true, "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                            output: acks.output, udp: true) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let device = try LoopbackUDPSender()
            #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                if context.stats.value("admissions.registered") == 0 { device.send(terminal.register(), to: port) }
                return context.stats.value("admissions.registered") >= 1
            })
            while let answer = device.receive(timeout: .milliseconds(300)) { #expect(answer[1...2] == [0x81, 0x00]) }
            device.send(terminal.frame(0x0003, []), to: port)
            let refused = try #require(device.receive().flatMap(JT808TestTerminal.parse))
            #expect(refused.id == 0x8001 && refused.body == JT808TestTerminal.word(terminal.serial) + [0x00, 0x03, 1])
            #expect(context.stats.value("admissions.refused_unauthenticated") == 1)
            device.send(terminal.frame(0x0200, Self.here), to: port)
            #expect(await Poll.until { acks.positions.count == 1 })
        }
    }

    // MARK: - A fleet sharing its state store

    /// Gateway B started before the terminal registered at gateway A: registering at B again, it
    /// gets the code A issued (not a new one that would lock it out at A).
    @Test func aTerminalRegisteredAtAnotherGatewayGetsTheSameCodeHere() async throws {
        let store = MemoryStateStore()
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { portA, _ in
            try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { portB, _ in
                var terminal = JT808TestTerminal(phone: "013912345678")
                let code = try Self.logIn(&terminal, try LoopbackTCPClient(port: portA))
                let b = try LoopbackTCPClient(port: portB)
                b.send(terminal.register())
                #expect(try #require(JT808TestTerminal.read(b)).body == JT808TestTerminal.word(terminal.serial) + [0] + code)
                b.send(terminal.frame(0x0102, code))
                #expect(try #require(JT808TestTerminal.read(b)).body.last == 0)
            }
        }
    }

    /// The code this gateway knows is stale (another gateway issued a new one): the new code is
    /// read from the store before it is refused.
    @Test func aCodeIssuedElsewhereIsReadFromTheStoreBeforeItIsRefused() async throws {
        let store = MemoryStateStore()
        try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            _ = try Self.logIn(&terminal, try LoopbackTCPClient(port: port))
            // Another gateway registered it anew.
            let record = try #require(store.records.withLock { $0.values.first })
            guard case .object(var o)? = record.state else { throw PeerError(description: "not an object: \(record)") }
            o["code"] = .string("NEWCODE")
            store.write([DeviceStateRecord(transform: record.transform, device: record.device, format: record.format, state: .object(o))],
                        sequence: 1) { _ in }
            let again = try LoopbackTCPClient(port: port)
            again.send(terminal.frame(0x0102, Array("NEWCODE".utf8)))
            #expect(try #require(JT808TestTerminal.read(again)).body.last == 0)
            #expect(context.stats.value("admissions.authenticated") == 2)
        }
    }

    /// Over UDP a terminal registered at another gateway is taken once its record is read (the
    /// first datagram starts the read; the terminal sends what it was not answered for again).
    @Test func overUDPATerminalRegisteredAtAnotherGatewayIsTaken() async throws {
        let store = MemoryStateStore()
        let acks = HeldAcknowledgements()
        let udp = #"{ "type": "jt808", "udp": true, "listen": "127.0.0.1:PORT", "devices": { "13912345678": "bus-12" } }"#
        try await withJT808(udp, store: store, output: acks.output, udp: true) { udpPort, context in
            try await withJT808(Self.strict, store: store, output: HeldAcknowledgements().output) { tcpPort, _ in
                var terminal = JT808TestTerminal(phone: "013912345678")
                _ = try Self.logIn(&terminal, try LoopbackTCPClient(port: tcpPort))
                let device = try LoopbackUDPSender()
                let location = terminal.frame(0x0200, Self.here)
                #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(200)) {
                    if acks.positions.isEmpty { device.send(location, to: udpPort) }
                    return !acks.positions.isEmpty
                }, "frames.unauthenticated \(context.stats.value("frames.unauthenticated"))")
            }
        }
    }

    // MARK: - Split messages

    /// README: missing packets are asked for up to three times. The source's clock is driven by
    /// the test: each request goes when its time has come, never twice for one time, and the
    /// message is dropped (`split.incomplete`) once `split_timeout` (60 s) has passed.
    @Test func aQuietTerminalIsAskedForMissingPacketsThreeTimesThenTheMessageIsDropped() async throws {
        let clock = ManualClock(start: Timestamp(year: 2026, month: 12, day: 5))
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, clock: clock, output: acks.output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            let first = terminal.serial &+ 1
            let packets = Self.packets(&terminal, 0x0704, JT808TestTerminal.batch([Self.here, Self.here, Self.here, Self.here]), total: 4, first: first)
            client.send(packets[0] + packets[1])
            #expect(await Poll.until { context.stats.value("messages.split_packet") == 2 })
            for step in [Duration.milliseconds(1_500), .seconds(20), .seconds(20)] {
                clock.advance(by: step)
                let request = try #require(JT808TestTerminal.read(client), "split.incomplete = \(context.stats.value("split.incomplete"))")
                #expect(request.id == 0x8003)
                #expect(request.body == JT808TestTerminal.word(first) + [2] + JT808TestTerminal.word(3) + JT808TestTerminal.word(4))
                #expect(client.readSome(timeout: .milliseconds(1_500)) == [], "asked again before its time")
            }
            clock.advance(by: .seconds(20))
            #expect(await Poll.until { context.stats.value("split.incomplete") == 1 })
            #expect(client.readSome(timeout: .milliseconds(1_500)) == [])
            #expect(context.stats.value("split.expired") == 0)
            #expect(acks.positions.isEmpty)
        }
    }

    /// Under `auth: issued` packets from a connection that has not authenticated as their terminal
    /// are not kept (`messages.split_refused`): the terminal is asked for them once it has.
    @Test func splitPacketsFromAConnectionNotAuthenticatedAreNotKept() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            let packets = Self.packets(&terminal, 0x0704, JT808TestTerminal.batch([Self.here, Self.here]), total: 2, first: 1)
            terminal.serial = 2
            client.send(packets[0])
            _ = try Self.logIn(&terminal, client)
            client.send(packets[1] + terminal.frame(0x0002, []))
            #expect(try #require(Self.read(0x8001, from: client)).body == JT808TestTerminal.word(terminal.serial) + [0x00, 0x02, 0])
            #expect(context.stats.value("messages.split_refused") == 1)
            #expect(context.stats.value("messages.0x0704") == 0, "the packet kept before authentication completed the message")
            let request = try #require(Self.read(0x8003, from: client))
            #expect(request.body == JT808TestTerminal.word(1) + [1] + JT808TestTerminal.word(1))
            client.send(packets[0])
            #expect(await Poll.until { acks.positions.count == 2 })
        }
    }

    /// Over UDP one codec reads every terminal: an unknown terminal's packets are not kept, and a
    /// known one holds at most a quarter of the room, so neither crowds out another's message.
    @Test(arguments: ["013900000099", "013900000002"])
    func overUDPAnotherTerminalsPacketsDoNotCrowdOutAMessage(other: String) async throws {
        let acks = HeldAcknowledgements()
        let json = #"{ "type": "jt808", "udp": true, "auth": "any", "listen": "127.0.0.1:PORT", "devices": { "13912345678": "bus-12", "13900000002": "bus-2" } }"#
        try await withJT808(json, output: acks.output, udp: true) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678"), flooder = JT808TestTerminal(phone: other)
            let device = try LoopbackUDPSender()
            let heartbeat = terminal.frame(0x0002, [])
            #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                if context.stats.value("frames.good") == 0 { device.send(heartbeat, to: port) }
                return context.stats.value("frames.good") >= 1
            })
            let mine = Self.packets(&terminal, 0x0704, JT808TestTerminal.batch([Self.here, Self.here]), total: 2, first: 10)
            device.send(mine[0], to: port)
            for k in 0..<64 {
                let theirs = Self.packets(&flooder, 0x0704, JT808TestTerminal.batch([Self.here, Self.here]), total: 2, first: UInt16(100 + 2 * k))
                device.send(theirs[0], to: port)
            }
            #expect(await Poll.until { context.stats.value("messages.split_packet") + context.stats.value("messages.split_refused") >= 65 })
            device.send(mine[1], to: port)
            #expect(await Poll.until { acks.positions.count == 2 }, "split.evicted \(context.stats.value("split.evicted"))")
        }
    }

    @Test func overUDPABadCheckCodeIsCountedAsABadChecksum() async throws {
        try await withJT808(#"{ "type": "jt808", "udp": true, "auth": "any", "listen": "127.0.0.1:PORT", "unknown_devices": "accept" }"#,
                            output: HeldAcknowledgements().output, udp: true) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let device = try LoopbackUDPSender()
            var broken = terminal.frame(0x0200, Self.here)
            broken[broken.count - 2] ^= 0x01
            #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                if context.stats.value("datagrams") == 0 { device.send(broken, to: port) }
                return context.stats.value("datagrams") >= 1
            })
            #expect(await Poll.until { context.stats.value("frames.bad.checksum") == 1 }, "frames.bad.length \(context.stats.value("frames.bad.length"))")
            #expect(context.stats.value("frames.bad.length") == 0)
            #expect(device.receive(timeout: .milliseconds(300)) == nil, "a bad frame is never answered")
        }
    }

    /// A batch with an undecodable fix: the others reach the sinks, the terminal is answered only
    /// once they are committed, the bad one is counted.
    @Test func aBatchWithAnUndecodableFixDeliversTheOthersBeforeItIsAnswered() async throws {
        let acks = HeldAcknowledgements()
        try await withJT808(Self.strict, output: acks.output) { port, context in
            var terminal = JT808TestTerminal(phone: "013912345678")
            let client = try LoopbackTCPClient(port: port)
            _ = try Self.logIn(&terminal, client)
            var offEarth = Self.here
            offEarth.replaceSubrange(8..<12, with: [0xFF, 0xFF, 0xFF, 0xFF])
            client.send(terminal.frame(0x0704, JT808TestTerminal.batch([Self.here, offEarth, Self.here])))
            #expect(await Poll.until { acks.positions.count == 2 })
            #expect(context.stats.value("positions.undecoded") == 1)
            #expect(client.readSome(timeout: .milliseconds(300)) == [], "answered before the commit")
            acks.acknowledge()
            #expect(try #require(JT808TestTerminal.read(client)).body == JT808TestTerminal.word(terminal.serial) + [0x07, 0x04, 0])
        }
    }

    @Test func optionsAreCheckedWithTheirPaths() throws {
        let (_, problems) = try PluginOptions.read(JT808SourcePlugin.self,
            #"{ "unknown_devices": "accept", "timezone": "Asia/Shanghai", "datum": "EPSG:32650", "auth": "sometimes" }"#)
        #expect(Set(problems.map(\.path)) == ["sources.under_test.timezone", "sources.under_test.datum", "sources.under_test.auth"])
    }
}
