import Foundation
import GatewayCore
import GatewayTesting
import NMEA
import ReceiverStream
import Testing
import UBX

/// Real u-blox logs (gpsd's regression suite): every NAV-PVT gives one position whose values
/// are the raw values an independent decoder read (Fixtures/ubx/*.navpvt.jsonl).
@Suite struct UBXLogTests {
    /// The position a NAV-PVT record of the oracle must give, field by field, by the documented mapping.
    static func expect(_ position: Position, matches r: [String: Any], log: String) {
        let at = "\(log) NAV-PVT at offset \(r.int("offset"))"
        let fixType = r.int("fixType"), diff = r.int("diffSoln") == 1, carr = r.int("carrSoln")
        let fixOK = r.int("gnssFixOk") == 1 || fixType == 5
        let valid = fixType != 0 && fixOK && r.int("invalidLlh") == 0
        var mode: FixMode = [0: .noFix, 1: .twoD, 2: .twoD, 3: .threeD, 4: .threeD, 5: .threeD][fixType] ?? .noFix
        var quality: FixQuality = [1: .estimated, 2: .gps, 3: .gps, 4: .gnssDeadReckoning, 5: .manual][fixType] ?? .unknown
        if diff && (1...4).contains(fixType) { quality = carr == 2 ? .rtkFixed : carr == 1 ? .rtkFloat : .dgps }
        if !valid { mode = .noFix; quality = .unknown }
        #expect(position.mode == mode, "\(at): mode")
        #expect(position.quality == quality, "\(at): status")
        if r.int("validDate") == 1 && r.int("validTime") == 1 {
            var c = DateComponents()
            c.year = r.int("year"); c.month = r.int("month"); c.day = r.int("day")
            c.hour = r.int("hour"); c.minute = r.int("min"); c.second = r.int("second")
            c.timeZone = TimeZone(identifier: "UTC")
            let seconds = Int64(Calendar(identifier: .gregorian).date(from: c)!.timeIntervalSince1970)
            let nanos = seconds * 1_000_000_000 + Int64(r.int("nano"))
            let ms = Int64((Double(nanos) / 1e6).rounded())
            #expect(position.time?.milliseconds == ms, "\(at): time")
        } else {
            #expect(position.time == nil, "\(at): time without validDate/validTime")
        }
        if valid {
            #expect(position.latitude == Double(r.int("lat")) * 1e-7, "\(at): lat")
            #expect(position.longitude == Double(r.int("lon")) * 1e-7, "\(at): lon")
            if mode == .threeD {
                #expect(position.altitude == Double(r.int("hMSL")) / 1000, "\(at): altMSL")
                #expect(position.ellipsoidHeight == Double(r.int("height")) / 1000, "\(at): altHAE")
            }
        } else {
            #expect(!position.hasCoordinates, "\(at): no coordinates for an invalid fix")
        }
        #expect(position.speed == Double(r.int("gSpeed")) / 1000, "\(at): speed")
        #expect(position.course == Double(r.int("headMot")) * 1e-5, "\(at): track")
        #expect(position.satellites == r.int("numSV"), "\(at): numSV")
        #expect(position.horizontalError == Double(r.int("hAcc")) / 1000, "\(at): hAcc")
        #expect(position.verticalError == Double(r.int("vAcc")) / 1000, "\(at): vAcc")
        #expect(position.pdop == Double(r.int("pDOP")) / 100, "\(at): pDOP")
        #expect(position.speedError == Double(r.int("sAcc")) / 1000, "\(at): sAcc")
        #expect(position.courseError == Double(r.int("headAcc")) / 100_000, "\(at): headAcc")
        // lastCorrectionAge codes 1–12 are ranges; the upper bound of each, only with diffSoln.
        let ageCode = r.int("lastCorrectionAge")
        let age: Double? = diff && (1...12).contains(ageCode) ? [1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 120][ageCode - 1] : nil
        #expect(position.correctionAge == age, "\(at): lastCorrectionAge \(ageCode)")
        #expect(position.attributes.isEmpty, "\(at): the figures are typed, not attributes")
        if r.int("headVehValid") == 1 {
            #expect(position.heading == Double(r.int("headVeh")) * 1e-5, "\(at): headVeh")
        }
    }

    @Test(arguments: StreamFixtures.ubxLogs)
    func everyNavPVTGivesOnePositionWithTheRawValues(log: String) throws {
        let decoded = decodeStream(try StreamFixtures.bytes("ubx/\(log).log"))
        let oracle = try StreamFixtures.records("ubx/\(log).navpvt.jsonl").filter { $0["msg"] as? String == "NAV-PVT" }
        let ubx = decoded.ubxPositions
        try #require(ubx.count == oracle.count, "\(log): \(ubx.count) positions from NAV-PVT, \(oracle.count) NAV-PVT")
        for (p, r) in zip(ubx, oracle) { Self.expect(p, matches: r, log: log) }
        // One position per epoch: no NMEA epoch repeats a NAV-PVT's time, and ids are unique.
        let times = ubx.compactMap { $0.time?.milliseconds }
        for p in decoded.positions where p.speedError == nil {
            if let t = p.time?.milliseconds { #expect(!times.contains { abs($0 - t) <= 15 }, "\(log): NMEA epoch \(t) repeats a NAV-PVT") }
        }
        #expect(Set(decoded.positions.map(\.id)).count == decoded.positions.count, "\(log): ids are unique")
        #expect(decoded.statistics.ubxBadChecksum == 0 && decoded.statistics.ubxTooLong == 0)
    }

    @Test(arguments: StreamFixtures.ubxLogs)
    func chunkedReadsGiveWhatOneReadGives(log: String) throws {
        let bytes = try StreamFixtures.bytes("ubx/\(log).log")
        let whole = decodeStream(bytes)
        var rng = SeededGenerator(seed: 47)
        let sizes = (0..<300).map { _ in Int.random(in: 1...97, using: &rng) }
        for chunks in [[1], [7], sizes] {
            let chunked = decodeStream(bytes, chunks: chunks)
            #expect(chunked.positions == whole.positions, "\(log) in reads of \(chunks.prefix(3))…")
            #expect(chunked.statistics == whole.statistics)
            #expect(chunked.antenna == whole.antenna && chunked.reports == whole.reports)
        }
    }

    @Test func theMixedF9TLogKeepsItsNMEAAndUBXApart() throws {
        let decoded = decodeStream(try StreamFixtures.bytes("ubx/ublox-zed-f9t-ubx_nmea_l5.log"))
        let s = decoded.statistics
        #expect(s.badChecksum == 0 && s.invalidCharacter == 0, "no UBX byte reached the NMEA framer as text: \(s)")
        #expect(s.accepted + s.unknown + s.proprietary == 252)
        // Its two MON-RF say antenna OK, jamming unknown (0): no report of either kind but the antenna.
        #expect(decoded.antenna == [.ok, .ok])
        #expect(decoded.reports.isEmpty)
    }

    @Test func rtcmFramesOnTheReceiversOutputAreCountedNotDecodedAsText() throws {
        let decoded = decodeStream(try StreamFixtures.bytes("ubx/ublox-f9p-rtcm.log"))
        #expect(decoded.statistics.rtcmFrames == 15)
        #expect(decoded.statistics.rtcmBadCRC == 0)
        #expect(decoded.ubxPositions.count == 2)
    }
}
