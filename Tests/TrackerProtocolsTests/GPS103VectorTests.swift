import GatewayCore
import Testing
@testable import TrackerProtocols

/// Every vector of `Fixtures/gps103.txt`, each with its stated outcome, positions against the
/// independent decoder's values and answers byte for byte.
@Suite struct GPS103VectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("gps103")) ?? []

    /// Outcome per vector: 40 positions (39 `F` reports and V11 in the `*` layout), five
    /// cell-only reports (`lbs`; V40 is an SOS, answered at once), seven OBD sentences, the
    /// login V12 and the heartbeat V47. GPS103 has no checksum: no vector is rejected.
    static let expected: [String: VectorExpectation] = {
        var table: [String: VectorExpectation] = [:]
        for id in ["V2", "V3", "V4", "V5", "V6", "V8", "V9", "V11", "V14", "V15", "V23", "V24", "V27", "V29", "V32", "V33",
                   "V39", "V44", "V50", "V52", "V53", "V54", "V55", "V59", "V60", "V61", "V64", "V65", "V66", "V67", "V68",
                   "V70", "V71", "V72", "V73", "V75", "V76", "V78", "V79", "V80"] {
            table[id] = .positions(1)
        }
        for id in ["V1", "V40", "V41", "V42", "V48"] { table[id] = .control("lbs") }
        for id in ["V13", "V18", "V21", "V31", "V34", "V37", "V38"] { table[id] = .control("obd") }
        table["V12"] = .control("login")
        table["V47"] = .control("heartbeat")
        return table
    }()

    static func vector(_ id: String) -> TrackerVector? { vectors[id: id] }

    /// The sentence as a device sends it: those the file gives without a terminator end with CR LF.
    static func wire(_ vector: TrackerVector) -> [UInt8] {
        guard let last = vector.frame.last, ![UInt8(ascii: ";"), UInt8(ascii: "*")].contains(last) else { return vector.frame }
        return vector.frame + [0x0D, 0x0A]
    }

    static func codec() -> GPS103Codec { GPS103Codec(limits: limits) }

    @Test func theFileHolds54VectorsAndEachHasAStatedOutcome() {
        VectorCheck.everyVectorHasAStatedOutcome(Self.vectors, Self.expected, count: 54)
    }

    @Test(arguments: VectorCheck.ids(expected))
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let ref = try TextRef.of(vector)
        let events = VectorCheck.decode(Self.codec(), Self.wire(vector), id)
        let answer = VectorCheck.textAnswer(vector.serverAnswer)
        let message = try #require(events.first?.message, "\(id): \(events)")
        #expect(events.count == 1, "\(id): \(events)")
        #expect(message.answer == answer, "\(id): \(String(decoding: message.answer ?? [], as: UTF8.self))")
        switch try #require(Self.expected[id]) {
        case .positions(let count):
            let records = try #require(message.records)
            #expect(records.positions.count == count)
            #expect(records.deviceID == ref.device)
            let fix = try #require(ref.ref)
            TextVectorCheck.check(try #require(records.positions.first), fix, id)
        case .control(let kind):
            #expect(message.controlKind == kind, "\(id): \(message)")
            if case .control(_, let device, _) = message { #expect(device == ref.device) }
        default:
            Issue.record("\(id): no such outcome for GPS103")
        }
        TextVectorCheck.sameWhateverTheSplit(Self.codec, Self.wire(vector), id)
    }

    // MARK: - Beyond the table

    @Test func theSOSIsAnsweredOnceItsPositionIsHandledAndAtOnceWithoutOne() throws {
        var runner = CodecRunner(Self.codec())
        let text = "imei:359586015829802,help me,0809231429,13554900601,F,062947.294,A,2234.4026,N,11354.3277,E,0.00,;"
        let records = try #require(runner.feed(Array(text.utf8)).first?.message?.records)
        #expect(records.answer == Array("**,imei:359586015829802,E;".utf8))
        #expect(records.positions.first?.attributes["alarm"] == "sos")
        // V40 has no fix: a control, answered at once.
        let lbs = try #require(Self.vector("V40"))
        var other = CodecRunner(Self.codec())
        #expect(other.feed(Self.wire(lbs)).first?.message?.controlKind == "lbs")
    }

    @Test func theLocalTimeIsFoldedIntoTheDayOfTheUTCTime() throws {
        // Local 2008-09-23 19:29, UTC 05:54:03: 13 h 35 min ahead folds to 10 h 25 min behind,
        // so the fix is on the next day in UTC.
        let vector = try #require(Self.vector("V14"))
        let position = try #require(CodecRunner(Self.codec()).decodedPosition(Self.wire(vector)))
        #expect(position.time == Timestamp(year: 2008, month: 9, day: 24, hour: 5, minute: 54, second: 3))
    }

    @Test func keywordsBecomeAlarmsEventsOrIgnition() throws {
        let cases: [(String, String, String)] = [("low battery", "alarm", "low_battery"), ("stockade", "alarm", "geofence"),
                                                 ("acc on", "ignition", "true"), ("vt14", "event", "vt14"), ("T:+11", "alarm", "temperature")]
        for (keyword, key, value) in cases {
            let text = "imei:359586015829802,\(keyword),0809231429,,F,062947.294,A,2234.4026,N,11354.3277,E,0.00,;"
            let position = try #require(CodecRunner(Self.codec()).decodedPosition(Array(text.utf8)), "\(keyword)")
            #expect(position.attributes[key] == value, "\(keyword): \(position.attributes)")
        }
    }

    @Test func aDatagramIsOneSentenceWithoutATerminator() throws {
        var runner = CodecRunner(GPS103Codec(limits: limits, datagrams: true))
        let vector = try #require(Self.vector("V53"))
        #expect(runner.feed(vector.frame).first?.message?.records?.positions.count == 1)
        var stream = CodecRunner(Self.codec())
        #expect(stream.feed(vector.frame).isEmpty, "over TCP a sentence waits for its terminator")
    }

    @Test func aStreamOfEverySentenceGivesTheSameMessagesWhateverTheReads() {
        let stream = Self.vectors.filter { $0.id.hasPrefix("V") }.flatMap(Self.wire)
        var whole = CodecRunner(Self.codec())
        whole.feed(stream)
        #expect(whole.messages.count == 54)
        for chunks in [[1], [3, 7], [64]] {
            var cut = CodecRunner(Self.codec())
            cut.feed(stream, chunks: chunks)
            #expect(firstDifference(whole.messages, cut.messages) == nil, "chunks \(chunks)")
        }
    }

    @Test func garbageAndOverlongSentencesAreSkipped() {
        var runner = CodecRunner(GPS103Codec(limits: TrackerLimits(maxFrameBytes: 64)))
        runner.feed(Array("hello;".utf8) + [UInt8](repeating: 0x41, count: 100) + Array(";359586015829802;".utf8))
        #expect(runner.events.compactMap { if case .invalid(let reason, _) = $0 { reason } else { nil } }.contains("too_large"))
        #expect(runner.messages.last?.controlKind == "heartbeat")
        #expect(runner.events.first == .invalid(reason: "syntax", close: false))
    }
}

extension CodecRunner {
    /// The first position decoded from `bytes`.
    func decodedPosition(_ bytes: [UInt8]) -> Position? {
        var copy = self
        return copy.feed(bytes).compactMap { $0.message?.records?.positions.first }.first
    }
}
