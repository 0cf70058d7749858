import GatewayCore
import Testing
@testable import TrackerProtocols

/// Every vector of `Fixtures/gl200.txt`, each with its stated outcome, with the default answers
/// and those of a device with SACK enabled, byte for byte.
@Suite struct GL200VectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("gl200")) ?? []

    /// Outcome per vector: 95 reports with a GPS block (three GTFRI with two), and 33 messages
    /// without one: information and cell reports, the three GTFRI whose blocks are empty, the
    /// heartbeat V183 and three command acknowledgements. @Track text has no checksum: no vector
    /// is rejected.
    static let expected: [String: VectorExpectation] = {
        var table: [String: VectorExpectation] = [:]
        for id in ["V2", "V3", "V7", "V8", "V9", "V10", "V12", "V15", "V16", "V17", "V22", "V25", "V26", "V27", "V30", "V32", "V33",
                   "V34", "V36", "V37", "V38", "V39", "V40", "V41", "V45", "V46", "V48", "V49", "V50", "V52", "V55", "V56", "V60",
                   "V66", "V71", "V73", "V74", "V76", "V77", "V78", "V79", "V80", "V82", "V86", "V87", "V88", "V92", "V96", "V100",
                   "V104", "V105", "V106", "V108", "V109", "V114", "V115", "V119", "V122", "V124", "V135", "V136", "V137", "V138",
                   "V139", "V140", "V142", "V144", "V146", "V148", "V151", "V152", "V153", "V154", "V155", "V159", "V162", "V165",
                   "V166", "V168", "V170", "V171", "V172", "V173", "V176", "V177", "V178", "V179", "V180", "V181", "V190", "V191", "V192"] {
            table[id] = .positions(1)
        }
        for id in ["V134", "V143", "V174"] { table[id] = .positions(2) }
        let controls: [String: [String]] = [
            "GTPNA": ["V11", "V63"], "GTIGF": ["V20"], "GTLBS": ["V23"], "GTDTT": ["V44"], "GTFRI": ["V47", "V110", "V150"],
            "GTINF": ["V29", "V53", "V93", "V121", "V125", "V126", "V128", "V130", "V149", "V187", "V188", "V189"],
            "GTPFA": ["V62"], "GTSTC": ["V64"], "GTCAN": ["V70", "V85"], "GTGSM": ["V111"], "GTWIF": ["V116", "V117"],
            "GTSTR": ["V120"], "GTVER": ["V182"], "heartbeat": ["V183"], "GTRTO": ["V184"], "GTJDC": ["V185"], "GTGEO": ["V186"],
        ]
        for (kind, ids) in controls { for id in ids { table[id] = .control(kind) } }
        return table
    }()

    static func vector(_ id: String) -> TrackerVector? { vectors[id: id] }
    static func codec(sack: Bool = false) -> GL200Codec { GL200Codec(limits: limits, sack: sack) }

    @Test func theFileHolds128VectorsAndEachHasAStatedOutcome() {
        VectorCheck.everyVectorHasAStatedOutcome(Self.vectors, Self.expected, count: 128)
    }

    @Test(arguments: VectorCheck.ids(expected))
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let ref = try TextRef.of(vector)
        for sack in [false, true] {
            let events = VectorCheck.decode(Self.codec(sack: sack), vector.frame, id)
            let message = try #require(events.first?.message, "\(id): \(events)")
            #expect(events.count == 1)
            let answer = VectorCheck.textAnswer(sack ? vector.serverAnswerSack : vector.serverAnswer)
            #expect(message.answer == answer, "\(id) sack \(sack): \(String(decoding: message.answer ?? [], as: UTF8.self))")
            switch try #require(Self.expected[id]) {
            case .positions(let count):
                let records = try #require(message.records)
                #expect(records.positions.count == count && ref.fixes.count == count)
                #expect(records.deviceID == ref.device)
                for (position, fix) in zip(records.positions, ref.fixes) {
                    TextVectorCheck.check(position, fix, id)
                    // A +BUFF report was held in the device: late.
                    #expect((position.attributes["late"] == "true") == (ref.header == "+BUFF"), "\(id): late")
                }
            case .control(let kind):
                #expect(message.controlKind == kind, "\(id): \(message)")
                if case .control(_, let device, _) = message { #expect(device == ref.device) }
            default:
                Issue.record("\(id): no such outcome for @Track")
            }
        }
        TextVectorCheck.sameWhateverTheSplit({ Self.codec(sack: true) }, vector.frame, id)
    }

    @Test func binaryFramesAreSkippedWholeAndTextFollows() throws {
        for id in ["F1", "F2", "F3"] {
            let stream = try #require(Self.vector(id))
            var runner = CodecRunner(Self.codec())
            runner.feed(stream.frame + Array("+ACK:GTHBD,1A0401,135790246811220,,20100214093254,11F0$".utf8))
            #expect(runner.events.first == .invalid(reason: "unsupported", close: false), "\(id): \(runner.events)")
            #expect(runner.messages.map(\.controlKind) == ["heartbeat"], "\(id)")
        }
        let text = try #require(Self.vector("F4"))
        var runner = CodecRunner(Self.codec())
        runner.feed(text.frame)
        #expect(runner.messages.first?.records?.positions.count == 1)
    }

    @Test func overUDPTheDatagramEndsTheMessage() throws {
        let vector = try #require(Self.vector("V183"))
        let frame = Array(vector.frame.dropLast())  // without its $
        var udp = CodecRunner(GL200Codec(limits: limits, datagrams: true))
        #expect(udp.feed(frame).first?.message?.controlKind == "heartbeat")
        var tcp = CodecRunner(Self.codec())
        #expect(tcp.feed(frame).isEmpty)
    }

    @Test func aBlockIsNotTakenFromTheSendTime() {
        // Two decimals right before the send time are not a GPS block.
        var runner = CodecRunner(Self.codec())
        let events = runner.feed(Array("+RESP:GTINF,1A0800,860599000773978,GL300,4.1,12.5,20161006082343,0C98$".utf8))
        #expect(events.first?.message?.controlKind == "GTINF")
    }
}
