import GatewayCore
import GatewayTesting
import Locking
import NMEA
import ReceiverSetup
import ReceiverStream
import Testing
import UBX

/// The exchange one message at a time (state machine) and the configurator over a simulated
/// receiver: ACK-ACK, ACK-NAK, no answer, a late answer, positions kept meanwhile.
@Suite struct ConfigExchangeTests {
    static func valset(_ label: String, _ value: UInt16, timeout: Duration = .seconds(1)) -> UBXCommand {
        let key = UBXConfigKey.named("CFG-RATE-MEAS")!
        return UBXCommand(label: label, summary: "CFG-RATE-MEAS=\(value)", frame: UBXValset.frame([UBXValset.Item(key: key, bits: UInt64(value))], layers: .ram), timeout: timeout)
    }

    static let monVer = UBXCommand(label: "init[9]", summary: "MON-VER", frame: UBXFrame.encode(UBXMessageID(0x0A, 0x04), payload: []), timeout: .seconds(1))
    static let t0 = Timestamp(milliseconds: 1_000_000)
    static func at(_ ms: Int64) -> Timestamp { Timestamp(milliseconds: t0.milliseconds + ms) }
    static let ack = UBXAcknowledgement(message: .cfgValset, accepted: true)
    static let nak = UBXAcknowledgement(message: .cfgValset, accepted: false)

    @Test func eachCommandWaitsForItsAnswerOrItsTimeout() {
        let commands = [Self.valset("a", 100), Self.valset("b", 0), Self.monVer, Self.valset("c", 200, timeout: .milliseconds(500))]
        var x = UBXConfigExchange(commands: commands)
        #expect(x.start() == .write(index: 0, frame: commands[0].frame))
        #expect(x.written(at: Self.t0) == .wait(until: Self.at(1000)))
        // An ACK for another message is not this one's.
        #expect(x.received(UBXAcknowledgement(message: UBXMessageID(0x06, 0x01), accepted: true), at: Self.at(10)) == .wait(until: Self.at(1000)))
        #expect(x.received(Self.ack, at: Self.at(40)) == .write(index: 1, frame: commands[1].frame))
        #expect(x.written(at: Self.at(50)) == .wait(until: Self.at(1050)))
        #expect(x.timePassed(now: Self.at(1049)) == .wait(until: Self.at(1050)))
        #expect(x.received(Self.nak, at: Self.at(60)) == .write(index: 2, frame: commands[2].frame))
        // MON-VER is not acknowledged: written, then straight to the next.
        #expect(x.written(at: Self.at(70)) == .write(index: 3, frame: commands[3].frame))
        #expect(x.written(at: Self.at(80)) == .wait(until: Self.at(580)))
        #expect(x.timePassed(now: Self.at(580)) == .finished)
        // The answer that comes too late changes nothing.
        #expect(x.received(Self.ack, at: Self.at(600)) == .finished)
        #expect(x.outcomes == [.acknowledged(elapsed: .milliseconds(40)), .rejected, .sent, .noAnswer])
    }

    @Test func aWriteFailureEndsTheExchange() {
        var x = UBXConfigExchange(commands: [Self.valset("a", 1), Self.valset("b", 2)])
        _ = x.start()
        #expect(x.writeFailed() == .finished)
        #expect(x.outcomes == [.notWritten, .notWritten])
    }

    /// A u-blox receiver in a test: answers each CFG-VALSET after 30 ms of its clock by the
    /// script (ACK, NAK, silence), the answer cut over two reads, and sends a NAV-PVT (one
    /// second later each time) with every read.
    final class SimulatedReceiver: ReceiverLink, @unchecked Sendable {
        enum Answer { case ack, nak, silence }
        struct State {
            var answers: [Answer]
            var pending: [UInt8] = []
            var answering = false
            var written: [[UInt8]] = []
            var reads = 0
        }
        let clock: ManualClock
        let state: Locked<State>

        init(clock: ManualClock, answers: [Answer]) {
            self.clock = clock
            state = Locked(State(answers: answers))
        }

        func write(_ bytes: [UInt8]) async throws {
            state.withLock { s in
                s.written.append(bytes)
                guard bytes[2] == 0x06, !s.answers.isEmpty else { return }
                switch s.answers.removeFirst() {
                case .ack: s.pending = UBXFrame.encode(.ackAck, payload: [bytes[2], bytes[3]])
                case .nak: s.pending = UBXFrame.encode(.ackNak, payload: [bytes[2], bytes[3]])
                case .silence: s.pending = []
                }
            }
        }

        func read(timeout: Duration) async throws -> [UInt8] {
            let (part, reads, first) = state.withLock { s -> ([UInt8], Int, Bool) in
                s.reads += 1
                // The first 5 bytes of an answer in one read, the rest in the next.
                let first = !s.answering
                let part = first ? Array(s.pending.prefix(5)) : s.pending
                s.pending = first ? Array(s.pending.dropFirst(5)) : []
                s.answering = first && !s.pending.isEmpty
                return (part, s.reads, first)
            }
            // The answer takes 30 ms; with none, the whole timeout passes.
            if first { clock.advance(by: part.isEmpty ? timeout : .milliseconds(30)) }
            let pvt = ConfigExchangeTests.navPVT(second: UInt8(reads))
            return first ? pvt + part : part + pvt
        }

        var written: [[UInt8]] { state.withLock { $0.written } }
        var reads: Int { state.withLock { $0.reads } }
    }

    static func navPVT(second: UInt8) -> [UInt8] {
        var p = [UInt8](repeating: 0, count: 92)
        p[4] = 0xEA; p[5] = 0x07; p[6] = 3; p[7] = 1; p[8] = 12; p[9] = 0; p[10] = second
        p[11] = 0x03; p[20] = 3; p[21] = 0x01; p[23] = 12
        p[24] = 0x40; p[25] = 0x4B; p[26] = 0x4C; p[27] = 0x08  // lon 139.2 °E-ish, any valid value
        return UBXFrame.encode(.navPVT, payload: p)
    }

    @Test func theConfiguratorReportsEachAnswerAndKeepsThePositionsOfThoseSeconds() async throws {
        let clock = ManualClock()
        let receiver = SimulatedReceiver(clock: clock, answers: [.ack, .nak, .silence])
        let commands = [Self.valset("init[0]", 100), Self.valset("init[1]", 0), Self.monVer, Self.valset("init[2]", 200, timeout: .milliseconds(700))]
        var options = NMEAOptions()
        options.source = "gnss"
        options.idPrefix = "gnss-"
        var decoder = ReceiverStreamDecoder(options: options)
        var positions: [Position] = []
        let log = RecordingLogHandler()
        let stats = ComponentStats(id: "gnss")
        let start = clock.now()
        let outcomes = try await ReceiverConfigurator.run(commands, link: receiver, decoder: &decoder, positions: &positions, clock: clock, logger: log.logger(label: "sources.gnss"), stats: stats)
        #expect(outcomes == [.acknowledged(elapsed: .milliseconds(30)), .rejected, .sent, .noAnswer])
        #expect(receiver.written == commands.map(\.frame), "exactly the configured frames, nothing else")
        // Two reads per answered command, one for the silence (the whole 700 ms).
        #expect(receiver.reads == 5)
        #expect(clock.now().milliseconds - start.milliseconds == 30 + 30 + 700)
        #expect(decoder.statistics.ubxFrames == 5 + 2 && decoder.statistics.ubxBadChecksum == 0)
        #expect(positions.count == 5, "every NAV-PVT read meanwhile is a position")
        #expect(stats.value("ubx_config_acknowledged") == 1 && stats.value("ubx_config_rejected") == 1 && stats.value("ubx_config_no_answer") == 1 && stats.value("ubx_config_sent") == 1)
        let lines = log.entries.map(\.message)
        #expect(lines.contains { $0.contains("init[0]: CFG-RATE-MEAS=100: ACK-ACK in 30 ms") })
        #expect(lines.contains { $0.contains("init[1]: CFG-RATE-MEAS=0: ACK-NAK") })
        #expect(lines.contains { $0.contains("init[2]: CFG-RATE-MEAS=200: no ACK within 700ms") })
    }
}
