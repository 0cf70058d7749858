import GatewayCore
import Testing
@testable import TrackerProtocols

/// Every vector of `Fixtures/watch.txt`, each with its stated outcome, and the framing streams.
@Suite struct WatchVectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("watch")) ?? []

    /// Outcome per vector: 25 positions (`UD…`, `WT` and alarms; seven of them with a wrong
    /// length field, accepted as the brackets say), the links V37 and V38 answered at once, and
    /// seven health readings without an answer. Watch frames have no checksum: none is rejected.
    static let expected: [String: VectorExpectation] = {
        var table: [String: VectorExpectation] = [:]
        for id in ["V1", "V3", "V4", "V5", "V7", "V9", "V11", "V14", "V15", "V16", "V17", "V18", "V22", "V23", "V24", "V28",
                   "V29", "V30", "V31", "V33", "V34", "V41", "V42", "V46", "V47"] {
            table[id] = .positions(1)
        }
        for (id, kind) in [("V2", "oxygen"), ("V6", "temp"), ("V10", "btemp2"), ("V20", "bphrt"), ("V37", "link"), ("V38", "link"),
                           ("V43", "pulse"), ("V44", "heart"), ("V45", "heart")] {
            table[id] = .control(kind)
        }
        return table
    }()

    static func vector(_ id: String) -> TrackerVector? { vectors[id: id] }
    static func codec() -> WatchCodec { WatchCodec(limits: limits) }

    @Test func theFileHolds34VectorsAndEachHasAStatedOutcome() {
        VectorCheck.everyVectorHasAStatedOutcome(Self.vectors, Self.expected, count: 34)
    }

    @Test(arguments: VectorCheck.ids(expected))
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let ref = try TextRef.of(vector)
        let events = VectorCheck.decode(Self.codec(), vector.frame, id)
        let message = try #require(events.first?.message, "\(id): \(events)")
        #expect(events.count == 1)
        let answer = VectorCheck.textAnswer(vector.serverAnswer)
        #expect(message.answer == answer, "\(id): \(String(decoding: message.answer ?? [], as: UTF8.self))")
        switch try #require(Self.expected[id]) {
        case .positions(let count):
            let records = try #require(message.records)
            #expect(records.positions.count == count)
            #expect(records.deviceID == ref.device)
            TextVectorCheck.check(try #require(records.positions.first), try #require(ref.ref), id)
        case .control(let kind):
            #expect(message.controlKind == kind, "\(id): \(message)")
            if case .control(_, let device, _) = message { #expect(device == ref.device) }
        default:
            Issue.record("\(id): no such outcome for watches")
        }
        TextVectorCheck.sameWhateverTheSplit(Self.codec, vector.frame, id)
    }

    @Test func framingStreamsGiveTheirFirstFrame() throws {
        for stream in Self.vectors where stream.id.hasPrefix("F") {
            let expected = try #require(stream.expectedFrame)
            var runner = CodecRunner(Self.codec())
            runner.feed(stream.frame)
            let first = try #require(runner.events.first?.message, "\(stream.id): \(runner.events)")
            if stream.id == "F7" {
                // Voice data escaped as }01…}05: one frame, up to the last ], answered nothing.
                #expect(first.controlKind == "tk" && runner.buffer.isEmpty && runner.events.count == 1)
                continue
            }
            var alone = CodecRunner(Self.codec())
            alone.feed(expected)
            #expect(alone.messages.first == first, "\(stream.id)")
        }
    }

    @Test func aFrameWithBracketsInsideEndsAtTheBracketThatBalancesTheFirst() throws {
        // F2 holds a Wi-Fi name "[LG_Wall-Mount A/C]".
        let stream = try #require(Self.vector("F2"))
        var runner = CodecRunner(Self.codec())
        let position = try #require(runner.feed(stream.frame).first?.message?.records?.positions.first)
        VectorCheck.near(position.latitude, 48.949273, 1e-9, "latitude", "F2")
    }

    @Test func alarmsAreAnsweredOnceHandledAndKeepTheirIndex() throws {
        let vector = try #require(Self.vector("V18"))
        let records = try #require(CodecRunner(Self.codec()).feedOnce(vector.frame)?.records)
        #expect(records.answer == Array("[ZJ*014111001332708*0075*0002*AL]".utf8))
        #expect(records.positions.first?.attributes["alarm"] == "AL")
        #expect(records.kind == "alarm")
    }

    @Test func otherWordsAreAnsweredAsTheProtocolSays() {
        for (content, answer) in [("INIT,13800138000,1,1", "[3G*1234567890*0006*INIT,1]"), ("TKQ", "[3G*1234567890*0003*TKQ]"),
                                  ("TKQ2", "[3G*1234567890*0004*TKQ2]"), ("JXTK,1,1,1,AMR", "[3G*1234567890*0007*JXTKR,1]")] {
            var runner = CodecRunner(Self.codec())
            let message = runner.feed(Array("[3G*1234567890*0009*\(content)]".utf8)).first?.message
            #expect(message?.answer == Array(answer.utf8), "\(content)")
        }
    }

    @Test func badEscapesGarbageAndUnclosedFramesAreSkipped() {
        var runner = CodecRunner(WatchCodec(limits: TrackerLimits(maxFrameBytes: 64)))
        runner.feed(Array("xx[3G*1*0002*TK,}09]".utf8) + Array("[3G*1*0002*".utf8) + [UInt8](repeating: 0x41, count: 80)
                    + Array("[SG*8800000015*0002*LK]".utf8))
        let reasons = runner.events.compactMap { if case .invalid(let reason, _) = $0 { reason } else { nil } }
        #expect(reasons.prefix(2) == ["syntax", "syntax"])
        #expect(reasons.contains("too_large"))
        #expect(runner.messages.last?.controlKind == "link")
    }
}

extension CodecRunner {
    /// The first message of `bytes`, decoded in one read.
    func feedOnce(_ bytes: [UInt8]) -> TrackerMessage? {
        var copy = self
        return copy.feed(bytes).compactMap(\.message).first
    }
}
