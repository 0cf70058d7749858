import Foundation
import GatewayCore
import GatewayTesting
import NMEA
import ReceiverStream
import Testing

/// pyubx2's streams with one broken frame each (Fixtures/bad/expect.json): only the broken
/// frame is lost, it is counted, and the scan resynchronises at the byte after its sync.
@Suite struct BadFrameTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let file: String
        /// Bad UBX checksums, bad RTCM CRCs and frames cut by the end of the input.
        let badChecksum: Int, badCRC: Int, truncated: Int
        var testDescription: String { file }
    }

    static let cases = [
        Case(file: "pygpsdata-BADCK2.log", badChecksum: 2, badCRC: 0, truncated: 0),
        Case(file: "pygpsdata-MIXED3BADCK.log", badChecksum: 1, badCRC: 0, truncated: 0),
        Case(file: "pygpsdata-BADHDR.log", badChecksum: 0, badCRC: 0, truncated: 0),
        Case(file: "pygpsdata-BADEOF1.log", badChecksum: 0, badCRC: 0, truncated: 1),
        Case(file: "pygpsdata-BADEOF2.log", badChecksum: 0, badCRC: 0, truncated: 1),
        Case(file: "pygpsdata-BADEOF3.log", badChecksum: 0, badCRC: 0, truncated: 1),
        Case(file: "pygpsdata-BADNMEAEOF.log", badChecksum: 0, badCRC: 0, truncated: 0),
        Case(file: "pygpsdata-NMEABADEND.log", badChecksum: 0, badCRC: 0, truncated: 0),
        Case(file: "pygpsdata-MIXED-RTCM3BADCRC.log", badChecksum: 0, badCRC: 1, truncated: 0),
    ]

    static func expectation(_ file: String) throws -> [String: Any] {
        let all = try StreamFixtures.json("bad/expect.json") as? [String: Any] ?? [:]
        return all[file] as? [String: Any] ?? [:]
    }

    /// Valid frames the decoder took: UBX, RTCM, and NMEA sentences that passed their checksum
    /// (`!` lines found in a damaged frame's bytes are framed as AIS, unchecked: not counted).
    static func frames(_ d: Decoded) -> Int {
        let s = d.statistics
        return s.ubxFrames + s.rtcmFrames + s.accepted + s.unknown + s.proprietary
    }

    @Test(arguments: cases)
    func onlyTheBrokenFrameIsLost(_ c: Case) throws {
        let bytes = try StreamFixtures.bytes("bad/\(c.file)")
        let expected = try Self.expectation(c.file)
        let ids = expected["valid_ids"] as? [Any] ?? []
        for chunks in [[], [1], [13]] {
            let d = decodeStream(bytes, chunks: chunks)
            #expect(Self.frames(d) == ids.count, "\(c.file) in reads of \(chunks): \(d.statistics)")
            #expect(d.statistics.ubxBadChecksum == c.badChecksum)
            #expect(d.statistics.rtcmBadCRC == c.badCRC)
            #expect(d.statistics.binaryTruncated == c.truncated)
            // Positions come only from whole frames: one per valid NAV-PVT.
            let navPVT = ids.filter { $0 as? String == "NAV-PVT" }.count
            #expect(d.ubxPositions.count == navPVT, "\(c.file): a position from a damaged frame?")
        }
    }

    /// Played in a loop, the truncated frame of one pass meets the start of the next: its
    /// checksum fails and the scan resumes after its false sync, so the second pass loses nothing.
    @Test(arguments: cases)
    func aLoopedStreamLosesOnlyTheBrokenFrames(_ c: Case) throws {
        let bytes = try StreamFixtures.bytes("bad/\(c.file)")
        let ids = (try Self.expectation(c.file))["valid_ids"] as? [Any] ?? []
        let twice = decodeStream(bytes + bytes, chunks: [64])
        // NMEABADEND and BADNMEAEOF end in a cut sentence that the next pass's `$` cuts off again.
        #expect(Self.frames(twice) == 2 * ids.count, "\(c.file) twice: \(twice.statistics)")
    }

    @Test func theFalseLengthInBADEOF2DoesNotSwallowTheFramesAfterIt() throws {
        let bytes = try StreamFixtures.bytes("bad/pygpsdata-BADEOF2.log")
        // The stub claims 284 payload bytes; what follows it is a whole stream of good frames.
        let good = try StreamFixtures.bytes("ubx/ublox-zed-f9p-rtk.log")
        let alone = decodeStream(good)
        let after = decodeStream(bytes + good, chunks: [100])
        // BADEOF2's own NAV-PVT, then every one of the log's.
        #expect(after.ubxPositions.count == 1 + alone.ubxPositions.count)
        #expect(Array(after.ubxPositions.suffix(alone.ubxPositions.count)) == alone.ubxPositions)
    }

    @Test func aStatedLengthAboveTheLimitIsAFalseSyncAtOnce() {
        // B5 62 01 07 with a length of 60000: not held back, the NMEA after it decodes in the same read.
        let gga = Array(NMEAChecksum.sentence(body: "GPGGA,123520,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,").utf8)
        let rmc = Array(NMEAChecksum.sentence(body: "GPRMC,123520,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W").utf8)
        var decoder = ReceiverStreamDecoder(options: StreamOptions.replay)
        var out: [Position] = []
        let bytes: [UInt8] = [0xB5, 0x62, 0x01, 0x07, 0x60, 0xEA] + gga + rmc
        bytes.withUnsafeBytes { decoder.decode($0, into: &out) }
        #expect(decoder.statistics.ubxTooLong == 1)
        #expect(decoder.statistics.accepted == 2)
    }
}
