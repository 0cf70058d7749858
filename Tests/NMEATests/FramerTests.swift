import GatewayCore
import NMEA
import GatewayTesting
import Testing

@Suite struct FramerTests {
    static let rmc = TestSupport.line("GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W")
    static let gga = TestSupport.line("GPGGA,123520,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")

    static func messyInput() throws -> [UInt8] {
        var bytes: [UInt8] = []
        for log in ["nmea-fuzzy-cases.log", "bt451.log", "saab-r4.log", "quectel-eg25-g.log"] {
            bytes += try TestSupport.fixture(log)
        }
        bytes += [0, 0, 0xFF, 0x24, 0x24] + Array(rmc.utf8) + [0x0D] + Array(gga.utf8.dropLast(2))
        return bytes
    }

    @Test(arguments: [1, 2, 3, 7, 64, 1000])
    func chunkedInputGivesTheSameOutputAsWholeInput(chunk: Int) throws {
        let bytes = try Self.messyInput()
        let whole = TestSupport.decode(bytes)
        let chunked = TestSupport.decode(bytes, chunks: [chunk])
        #expect(chunked.positions == whole.positions)
        #expect(chunked.statistics == whole.statistics)
        #expect(whole.positions.count > 50)
    }

    @Test func randomChunkSizesGiveTheSameOutput() throws {
        let bytes = try Self.messyInput()
        let whole = TestSupport.decode(bytes)
        var rng = SeededGenerator(seed: 42)
        for _ in 0..<5 {
            let sizes = (0..<200).map { _ in Int.random(in: 1...90, using: &rng) }
            let chunked = TestSupport.decode(bytes, chunks: sizes)
            #expect(chunked.positions == whole.positions)
            #expect(chunked.statistics == whole.statistics)
        }
    }

    @Test(arguments: [
        "GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,0.000000000000000000000000000001,M,46.9,M,,",
        "GPGGA,123519,4807.0000000000000000000000038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
        "GPRMC,123519,A,4807.038,N,01131.000,E,0.00000000000000000000000000000000000000000022,084.4,230394,003.1,W",
        "GPGGA,123519,4807.038,N,01131.000,E,1,08,99999999999999999999999999.9,545.4,M,46.9,M,,",
        "GPGGA,123519,4807.03800000000000001,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
    ])
    func absurdNumberFieldsAreBadFieldsNotCrashes(body: String) {
        let r = TestSupport.decode(TestSupport.line(body))
        #expect(r.statistics.badField == 1)
        #expect(r.positions.isEmpty)
    }

    @Test func nulBytesBetweenLinesAreNoise() {
        let r = TestSupport.decode("\0\0\0" + Self.rmc + "\0\0")
        #expect(r.positions.count == 1)
        #expect(r.statistics.noiseBytes == 5)
        #expect(r.statistics.accepted == 1)
    }

    @Test func nulByteInsideASentenceRejectsIt() {
        var text = Self.rmc
        text.insert("\0", at: text.index(text.startIndex, offsetBy: 10))
        let r = TestSupport.decode(text)
        #expect(r.positions.isEmpty)
        #expect(r.statistics.invalidCharacter == 1)
    }

    @Test func doubleDollarPrefixIsAccepted() {
        let r = TestSupport.decode("$" + Self.rmc)
        #expect(r.statistics.accepted == 1)
        #expect(r.statistics.rejected == 0)
    }

    @Test func sentenceStartingInsideAnotherRestartsTheFrame() {
        let cut = String(Self.gga.prefix(30))
        let r = TestSupport.decode(cut + Self.rmc)
        #expect(r.statistics.truncated == 1)
        #expect(r.statistics.accepted == 1)
        #expect(r.positions.first?.latitude != nil)
    }

    @Test(arguments: ["\r", "\n", "\r\n", "\n\r"])
    func anyLineEndingWorks(ending: String) {
        let text = (Self.rmc + Self.gga).replacingOccurrences(of: "\r\n", with: ending)
        let r = TestSupport.decode(text)
        #expect(r.statistics.accepted == 2)
        #expect(r.positions.count == 2)
    }

    @Test func overLongLinesAreCountedAndSkipped() {
        let long = "$GPTXT," + String(repeating: "A", count: 400) + "*00\r\n"
        let r = TestSupport.decode(long + Self.rmc)
        #expect(r.statistics.tooLong == 1)
        #expect(r.statistics.accepted == 1)
        var options = NMEAOptions()
        options.maxSentenceLength = 1000
        let relaxed = TestSupport.decode(long + Self.rmc, options: options)
        #expect(relaxed.statistics.tooLong == 0)
        #expect(relaxed.statistics.badChecksum == 1)
    }

    @Test func lowercaseChecksumIsAccepted() {
        let body = "GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W"
        let hex = String(NMEAChecksum.compute(body), radix: 16)
        let r = TestSupport.decode("$\(body)*\(hex.count == 1 ? "0" + hex : hex)\r\n")
        #expect(r.statistics.accepted == 1)
    }

    @Test func wrongChecksumIsRejected() {
        let r = TestSupport.decode(Self.rmc.replacingOccurrences(of: "*", with: "0*"))
        #expect(r.statistics.badChecksum == 1)
        #expect(r.positions.isEmpty)
    }

    @Test(arguments: [true, false])
    func missingChecksumFollowsTheOption(require: Bool) {
        var options = NMEAOptions()
        options.requireChecksum = require
        let r = TestSupport.decode("$GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W\r\n", options: options)
        #expect(r.statistics.missingChecksum == (require ? 1 : 0))
        #expect(r.positions.count == (require ? 0 : 1))
    }

    @Test func binaryNoiseIsSkipped() {
        var rng = SeededGenerator(seed: 7)
        var bytes: [UInt8] = (0..<5000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        bytes += [0x0A] + Array(Self.rmc.utf8)
        let r = TestSupport.decode(bytes)
        #expect(r.statistics.noiseBytes > 0)
        #expect(r.positions.last?.time == Timestamp(year: 1994, month: 3, day: 23, hour: 12, minute: 35, second: 19))
    }

    @Test func truncatedFinalLineIsDecodedOnFlush() {
        let r = TestSupport.decode(String(Self.rmc.dropLast()))  // "\r\n" is one Character
        #expect(r.statistics.accepted == 1)
        #expect(r.positions.count == 1)
    }

    @Test func commentsAndAISAreCounted() {
        let r = TestSupport.decode("# header\r\n" + Self.rmc + "#note $GPGGA inside\n!AIVDM,1,1,,A,13aEOK?P00PD2wVMdLDRhgvL289?,0*26\r\n")
        #expect(r.statistics.comments == 2)
        #expect(r.statistics.ais == 1)
        #expect(r.statistics.accepted == 1)
    }

    @Test func checksumHelperBuildsAFullSentence() {
        #expect(NMEAChecksum.sentence(body: "PMTK220,1000") == "$PMTK220,1000*1F\r\n")
        #expect(NMEAChecksum.sentence(body: "$PMTK220,1000") == "$PMTK220,1000*1F\r\n")
    }

    @Test func unknownAndProprietarySentencesAreCounted() {
        let r = TestSupport.decode(TestSupport.line("GPRMB,A,0.66,L,003,004") + TestSupport.line("PGRME,15.0,M,45.0,M,25.0,M"))
        #expect(r.statistics.unknown == 1)
        #expect(r.statistics.proprietary == 1)
    }

    @Test func unparsableFieldRejectsTheSentence() {
        let r = TestSupport.decode(TestSupport.line("GPRMC,123519,A,48x7.038,N,01131.000,E,022.4,084.4,230394,003.1,W"))
        #expect(r.statistics.badField == 1)
        #expect(r.positions.isEmpty)
    }
}
