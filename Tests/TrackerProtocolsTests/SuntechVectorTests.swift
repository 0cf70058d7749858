import GatewayCore
import Testing
@testable import TrackerProtocols

/// Every vector of `Fixtures/suntech.txt`, each with its stated outcome, and the framing streams.
/// Suntech devices are never answered.
@Suite struct SuntechVectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("suntech")) ?? []

    /// Outcome per vector: 46 positions (legacy SA200/ST300/ST600 reports, ST910, ST4xx,
    /// universal text, universal binary and zip), and eight messages without one: command results
    /// V8 and V61, the BLE scan V11, the keep-alive V47, V63 (`-Error`, not a report), the trip
    /// summaries V78 and V79, and the crash report V70 — which no framer can cut (its binary
    /// samples hold a CR not followed by a line feed), so it is read up to that CR and the rest
    /// of it is a second, unknown report. Suntech has no checksum: no vector is rejected.
    static let expected: [String: VectorExpectation] = {
        var table: [String: VectorExpectation] = [:]
        for id in ["V1", "V3", "V5", "V10", "V12", "V13", "V17", "V19", "V21", "V22", "V23", "V28", "V29", "V30", "V31", "V33",
                   "V34", "V35", "V37", "V38", "V39", "V40", "V44", "V45", "V48", "V49", "V50", "V51", "V52", "V53", "V55", "V57",
                   "V58", "V59", "V60", "V64", "V66", "V67", "V69", "V71", "V73", "V74", "V76", "V77", "V80", "V81"] {
            table[id] = .positions(1)
        }
        for (id, kind) in [("V8", "command_result"), ("V61", "command_result"), ("V11", "bsa"), ("V47", "keep_alive"),
                           ("V63", "other"), ("V70", "crash_report"), ("V78", "trip"), ("V79", "trip")] {
            table[id] = .control(kind)
        }
        return table
    }()

    static func vector(_ id: String) -> TrackerVector? { vectors[id: id] }
    static func codec() -> SuntechCodec { SuntechCodec(limits: limits) }

    /// The report as sent (text reports end with a CR), then a keep-alive: a report with serial
    /// data whose last byte is its CR is complete only once the next byte shows no line feed follows.
    static let keepAlive = Array("ST600ALV;008728327\r".utf8)
    static func wire(_ vector: TrackerVector) -> [UInt8] { vector.frame + (vector.isText ? [0x0D] : []) }

    @Test func theFileHolds54VectorsAndEachHasAStatedOutcome() {
        VectorCheck.everyVectorHasAStatedOutcome(Self.vectors, Self.expected, count: 54)
    }

    @Test(arguments: VectorCheck.ids(expected))
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let ref = try TextRef.of(vector)
        let events = VectorCheck.decode(Self.codec(), Self.wire(vector) + Self.keepAlive, id)
        let messages = events.compactMap(\.message)
        #expect(messages.allSatisfy { $0.answer == nil }, "\(id): Suntech devices get no answer")
        #expect(messages.last?.controlKind == "keep_alive", "\(id): \(events)")
        let message = try #require(messages.first)
        switch try #require(Self.expected[id]) {
        case .positions(let count):
            #expect(messages.count == 2, "\(id): \(events)")
            let records = try #require(message.records, "\(id): \(message)")
            #expect(records.positions.count == count)
            #expect(records.deviceID == ref.device)
            let position = try #require(records.positions.first)
            TextVectorCheck.check(position, try #require(ref.ref), id)
            #expect((position.attributes["late"] == "true") == (vector.refJSON?.contains("\"archive\": true") == true), "\(id): late")
        case .control(let kind):
            #expect(messages.count == (id == "V70" ? 3 : 2), "\(id): \(events)")
            #expect(message.controlKind == kind, "\(id): \(message)")
        default:
            Issue.record("\(id): no such outcome for Suntech")
        }
        TextVectorCheck.sameWhateverTheSplit(Self.codec, Self.wire(vector) + Self.keepAlive, id)
    }

    @Test func framingStreamsGiveTheirFirstFrame() throws {
        for stream in Self.vectors where stream.id.hasPrefix("F") {
            let expected = try #require(stream.expectedFrame)
            var runner = CodecRunner(Self.codec())
            runner.feed(stream.frame + Self.keepAlive)
            let first = try #require(runner.messages.first, "\(stream.id)")
            // The expected frame is what Traccar's framer hands on: text without its CR.
            let text = expected.first != 0x02 && expected.count > 1 && expected[1] != 0
            var alone = CodecRunner(Self.codec())
            alone.feed(expected + (text ? [0x0D] : []) + Self.keepAlive)
            #expect(alone.messages.first == first, "\(stream.id)")
        }
    }

    @Test func aReportWithoutSerialDataEndsAtItsCRAtOnce() throws {
        var runner = CodecRunner(Self.codec())
        #expect(runner.feed(Self.wire(try #require(Self.vector("V28")))).count == 1)
        // One with serial data waits for the byte after its CR; over UDP the datagram's end ends it.
        var uex = CodecRunner(Self.codec())
        let serial = try #require(Self.vector("V13"))
        #expect(uex.feed(serial.frame).isEmpty)
        var udp = CodecRunner(SuntechCodec(limits: limits, datagrams: true))
        #expect(udp.feed(serial.frame).first?.message?.records != nil)
    }

    @Test func aZipReportWithoutItsEndByteIsBad() throws {
        var frame = try #require(Self.vector("V1")).frame
        frame[frame.count - 1] = 0x04
        var runner = CodecRunner(Self.codec())
        #expect(runner.feed(frame).first == .invalid(reason: "stop_bytes", close: false))
    }
}
