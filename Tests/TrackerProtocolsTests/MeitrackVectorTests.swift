import GatewayCore
import Testing
@testable import TrackerProtocols

/// Every vector of `Fixtures/meitrack.txt`, each with its stated outcome: positions against the
/// independent decoder's values, the CCC and AAC answers byte for byte, bad frames rejected.
@Suite struct MeitrackVectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("meitrack")) ?? []

    /// Outcome per vector: 16 `AAA` reports, 11 `CCE` and one `CCC` cache batch (28 messages, 41
    /// positions), the `AAC` V51 answered at once, and five bad frames: the checksums of V14,
    /// V25 and V48, the length of V35 (two bytes too many) and the photo packet V20 (its length
    /// and checksum both wrong).
    static let expected: [String: VectorExpectation] = {
        var table: [String: VectorExpectation] = [:]
        for id in ["V2", "V3", "V7", "V12", "V17", "V18", "V19", "V21", "V22", "V23", "V27", "V30", "V33", "V36", "V37", "V39",
                   "V40", "V41", "V43", "V44", "V45", "V46", "V49"] {
            table[id] = .positions(1)
        }
        table["V11"] = .positions(2)
        for id in ["V1", "V8", "V13", "V15"] { table[id] = .positions(3) }
        table["V51"] = .control("AAC")
        for id in ["V14", "V25", "V48"] { table[id] = .rejected("checksum") }
        for id in ["V35", "V20"] { table[id] = .rejected("length") }
        return table
    }()

    static func vector(_ id: String) -> TrackerVector? { vectors[id: id] }
    static func codec() -> MeitrackCodec { MeitrackCodec(limits: limits) }

    @Test func theFileHolds34VectorsAndEachHasAStatedOutcome() {
        VectorCheck.everyVectorHasAStatedOutcome(Self.vectors, Self.expected, count: 34)
    }

    @Test(arguments: VectorCheck.ids(expected))
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let ref = try TextRef.of(vector)
        var runner = CodecRunner(Self.codec())
        let events = runner.feed(vector.frame)
        #expect(runner.consumedWasSane)
        let answer = VectorCheck.textAnswer(vector.serverAnswer)
        switch try #require(Self.expected[id]) {
        case .positions(let count):
            let records = try #require(events.first?.message?.records, "\(id): \(events)")
            #expect(events.count == 1 && runner.buffer.isEmpty)
            #expect(records.positions.count == count && ref.fixes.count == count)
            #expect(records.deviceID == ref.device)
            #expect(records.answer == answer, "\(id): \(String(decoding: records.answer ?? [], as: UTF8.self))")
            for (position, fix) in zip(records.positions, ref.fixes) {
                TextVectorCheck.check(position, fix, id)
                // Cache batches are what the device stored while it could not send.
                #expect((position.attributes["late"] == "true") == (ref.command == "CCC" || ref.command == "CCE"), "\(id): late")
            }
        case .control(let kind):
            let message = try #require(events.first?.message, "\(id): \(events)")
            #expect(message.controlKind == kind)
            #expect(message.answer == answer, "\(id): \(String(decoding: message.answer ?? [], as: UTF8.self))")
        case .rejected(let reason):
            #expect(answer == nil, "\(id): the file owes a bad frame an answer")
            // What follows the bad frame is read: its length, when wrong, is found by the next frame's bytes.
            let next = try #require(Self.vector("V19")).frame
            var followed = CodecRunner(Self.codec())
            let after = followed.feed(vector.frame + next)
            VectorCheck.rejected(after, reason: reason, id)
            #expect(after.compactMap(\.message).count == 1 && after.compactMap(\.message).first?.records != nil, "\(id): \(after)")
        default:
            Issue.record("\(id): no such outcome for Meitrack")
        }
        TextVectorCheck.sameWhateverTheSplit(Self.codec, vector.frame + (Self.vector("V19")?.frame ?? []), id)
    }

    @Test func theFramingStreamGivesItsFrame() throws {
        let stream = try #require(Self.vector("F1"))
        var runner = CodecRunner(Self.codec())
        runner.feed(stream.frame)
        var alone = CodecRunner(Self.codec())
        alone.feed(try #require(stream.expectedFrame))
        #expect(runner.messages.count == 1 && runner.messages == alone.messages)
    }

    @Test func theCCCAnswerCountsThePacketsWithItsTrueLength() {
        // 26 bytes and the digits of the count: Traccar's 27 + n/10 is right only below 20.
        #expect(Array(MeitrackCodec.command(flag: UInt8(ascii: "X"), imei: "369800014090021", "CCC,25").prefix(6)) == Array("@@X28,".utf8))
        #expect(Array(MeitrackCodec.command(flag: UInt8(ascii: "X"), imei: "369800014090021", "CCC,100").prefix(6)) == Array("@@X29,".utf8))
    }

    @Test func garbageBeforeAFrameAndATooLargeLengthAreSkipped() throws {
        let good = try #require(Self.vector("V19")).frame
        var runner = CodecRunner(MeitrackCodec(limits: TrackerLimits(maxFrameBytes: 512)))
        runner.feed(Array("xx$$A99999,1*00\r\n".utf8) + good)
        let reasons = runner.events.compactMap { if case .invalid(let reason, _) = $0 { reason } else { nil } }
        #expect(reasons == ["syntax", "too_large"])
        #expect(runner.messages.count == 1)
    }
}
