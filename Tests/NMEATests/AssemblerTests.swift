import GatewayCore
import NMEA
import Testing

@Suite struct AssemblerTests {
    static func decode(_ bodies: [String], options: NMEAOptions = NMEAOptions()) -> [Position] {
        TestSupport.decode(bodies.map(TestSupport.line).joined(), options: options).positions
    }

    @Test func oneEpochMergesRMCGGAGSAAndVTG() throws {
        let p = Self.decode([
            "GPGGA,123519.00,4807.038,N,01131.000,E,4,08,0.9,545.4,M,46.9,M,,",
            "GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1",
            "GPRMC,123519.00,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W,R",
            "GPVTG,084.4,T,,M,022.4,N,041.5,K,R",
        ])
        #expect(p.count == 1)
        let e = try #require(p.first)
        #expect(e.time == Timestamp(year: 1994, month: 3, day: 23, hour: 12, minute: 35, second: 19))
        #expect(e.mode == .threeD)
        #expect(e.quality == .rtkFixed)
        #expect(e.altitude == 545.4)
        #expect(e.satellites == 8)
        #expect(e.pdop == 2.5 && e.hdop == 1.3 && e.vdop == 2.1)
        #expect(abs((e.speed ?? 0) - 22.4 * 1852 / 3600) < 1e-9)
        #expect(e.course == 84.4)
        #expect(abs((e.latitude ?? 0) - (48 + 7.038 / 60)) < 1e-12)
        #expect(e.datum == .wgs84)
    }

    @Test func midnightRolloverAdvancesTheDate() {
        let p = Self.decode([
            "GPRMC,235959,A,4807.038,N,01131.000,E,0,0,311299,,",
            "GPGGA,000000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
            "GPGGA,000001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
        ])
        #expect(p.map(\.time) == [
            Timestamp(year: 1999, month: 12, day: 31, hour: 23, minute: 59, second: 59),
            Timestamp(year: 2000, month: 1, day: 1),
            Timestamp(year: 2000, month: 1, day: 1, second: 1),
        ])
    }

    /// Each RMC's date counts, repeated or changed (the assembler keeps the last one's day
    /// number), whatever a ZDA between them said.
    @Test func everyRMCDateCounts() {
        let p = Self.decode([
            "GPRMC,120000,A,4807.038,N,01131.000,E,0,0,010124,,",
            "GPRMC,120001,A,4807.038,N,01131.000,E,0,0,010124,,",
            "GPRMC,120002,A,4807.038,N,01131.000,E,0,0,020124,,",
            "GPZDA,120003,05,06,2024,00,00",
            "GPRMC,120004,A,4807.038,N,01131.000,E,0,0,020124,,",
            "GPRMC,120005,A,4807.038,N,01131.000,E,0,0,010124,,",
            "GPRMC,120006,A,4807.038,N,01131.000,E,0,0,010199,,",
        ])
        #expect(p.map(\.time) == [
            Timestamp(year: 2024, month: 1, day: 1, hour: 12),
            Timestamp(year: 2024, month: 1, day: 1, hour: 12, second: 1),
            Timestamp(year: 2024, month: 1, day: 2, hour: 12, second: 2),
            Timestamp(year: 2024, month: 6, day: 5, hour: 12, second: 3),
            Timestamp(year: 2024, month: 1, day: 2, hour: 12, second: 4),
            Timestamp(year: 2024, month: 1, day: 1, hour: 12, second: 5),
            Timestamp(year: 1999, month: 1, day: 1, hour: 12, second: 6),
        ])
    }

    @Test(arguments: [("230394", 1994), ("230380", 2080), ("230381", 1981), ("230300", 2000), ("230324", 2024)])
    func twoDigitYearsFollowGpsdsCentury(date: String, year: Int) {
        let p = Self.decode(["GPRMC,120000,A,4807.038,N,01131.000,E,0,0,\(date),,"])
        #expect(p.first?.time?.components.year == year)
    }

    @Test func ggaOnlyEpochsUseTheLastKnownDate() {
        let p = Self.decode([
            "GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
            "GPZDA,120001,05,06,2024,00,00",
            "GPGGA,120002,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,",
        ])
        #expect(p.count == 3)
        #expect(p[0].time == nil)
        #expect(p[0].id == "n1")
        #expect(p[2].time == Timestamp(year: 2024, month: 6, day: 5, hour: 12, second: 2))
        #expect(p[2].mode == .threeD)
    }

    @Test func gstGivesErrorsAndHDTGivesHeading() throws {
        let p = Self.decode([
            "GPRMC,120000,A,4807.038,N,01131.000,E,0,0,050624,,",
            "GPGST,120000,1.0,2.0,1.0,45.0,3.0,4.0,5.0",
            "GPHDT,123.4,T",
        ])
        let e = try #require(p.first)
        #expect(e.horizontalError == 5.0)
        #expect(e.verticalError == 5.0)
        #expect(e.heading == 123.4)
        #expect(e.mode == .twoD)
    }

    @Test func idsAreDeterministicAndCarryOptions() throws {
        var options = NMEAOptions()
        options.idPrefix = "rx1-"
        options.source = "receiver"
        options.device = "/dev/ttyACM0"
        let bodies = ["GPRMC,120000.5,A,4807.038,N,01131.000,E,0,0,050624,,"]
        let a = Self.decode(bodies, options: options)
        let b = Self.decode(bodies, options: options)
        let e = try #require(a.first)
        #expect(a == b)
        #expect(e.id == "rx1-" + String(Timestamp(year: 2024, month: 6, day: 5, hour: 12, millisecond: 500).milliseconds))
        #expect(e.source == "receiver" && e.device == "/dev/ttyACM0")
    }

    @Test func invalidStatusGivesNoFixWithoutCoordinates() throws {
        let p = Self.decode(["GPRMC,120000,V,4807.038,N,01131.000,E,0,0,050624,,,N"])
        let e = try #require(p.first)
        #expect(e.mode == .noFix)
        #expect(e.latitude == nil)
    }

    @Test(arguments: [(0, FixQuality.unknown), (1, .gps), (2, .dgps), (4, .rtkFixed), (5, .rtkFloat), (6, .estimated), (7, .manual), (8, .simulated)])
    func ggaQualityMapsToGpsdStatus(quality: Int, expected: FixQuality) {
        let p = Self.decode(["GPGGA,120000,4807.038,N,01131.000,E,\(quality),08,0.9,545.4,M,46.9,M,,"])
        #expect(p.first?.quality == expected)
        #expect(p.first?.mode == (quality == 0 ? .noFix : .threeD))
    }
}

@Suite struct UntimedIDTests {
    /// GGA only: a time of day but never a date, so the fixes have no time.
    static let undated = TestSupport.line("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        + TestSupport.line("GPGGA,120001.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")

    @Test func replaysNumberUntimedFixesTheSameWayEachTime() {
        var o = NMEAOptions()
        o.idPrefix = "rx-"
        let a = TestSupport.decode(Self.undated, options: o).positions.map(\.id)
        #expect(a == ["rx-n1", "rx-n2"])
        #expect(TestSupport.decode(Self.undated, options: o).positions.map(\.id) == a)
    }

    @Test func liveSourcesNeverRepeatAnUntimedIdAfterAReconnect() {
        var ids: [String] = []
        for _ in 0..<3 {   // three connections, one decoder each
            var o = NMEAOptions()
            o.idPrefix = "rx-"
            o.untimedToken = RunToken.next()
            ids += TestSupport.decode(Self.undated, options: o).positions.map(\.id)
        }
        #expect(ids.count == 6)
        #expect(Set(ids).count == 6)
        #expect(ids.allSatisfy { $0.hasPrefix("rx-n") })
    }
}

@Suite struct IdleFlushTests {
    let rmc = TestSupport.line("GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W")
    let gga = TestSupport.line("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")

    func feed(_ d: inout NMEADecoder, _ s: String, _ out: inout [Position]) {
        Array(s.utf8).withUnsafeBytes { d.decode($0, into: &out) }
    }

    @Test func anIdleFlushInTheMiddleOfALineKeepsTheLine() {
        var d = NMEADecoder(options: NMEAOptions())
        var out: [Position] = []
        feed(&d, rmc, &out)
        feed(&d, String(gga.prefix(30)), &out)
        d.flushIdle(into: &out)       // a pause inside a serial read or a TCP stream
        feed(&d, String(gga.dropFirst(30)), &out)
        d.flush(into: &out)
        #expect(out.contains { $0.altitude == 545.4 })
        #expect(d.statistics.noiseBytes == 0 && d.statistics.rejected == 0)
    }

    @Test func anEpochSplitByAnIdleFlushKeepsItsIdsUnique() {
        var o = NMEAOptions()
        o.idPrefix = "rx-"
        var d = NMEADecoder(options: o)
        var out: [Position] = []
        feed(&d, rmc, &out)
        d.flushIdle(into: &out)
        feed(&d, gga, &out)
        d.flush(into: &out)
        #expect(out.count == 2)
        #expect(Set(out.map(\.id)).count == 2)
        #expect(out.last?.id.hasSuffix("-1") == true)
    }
}

@Suite struct AntennaSentenceTests {
    @Test(arguments: [
        ("$GPTXT,01,01,02,ANTSTATUS=OPEN*2B\r\n", AntennaStatus?.some(.open)),
        ("$GNTXT,01,01,02,ANTSTATUS=OK*25\r\n", .ok),
        ("$GPTXT,01,01,02,ANTSTATUS=SHORT*6D\r\n", .short),
        ("$GNTXT,01,01,02,ANTSTATUS=INIT*3B\r\n", nil),
        ("$PGTOP,11,3*6F\r\n", .ok),
        ("$PGTOP,11,2*6E\r\n", .open),
        ("$PGTOP,11,1*6D\r\n", .short),
        ("$GPTXT,01,01,02,locgate test padding*5D\r\n", nil),
    ])
    func antennaStatusSentencesAreReported(line: String, expected: AntennaStatus?) {
        var decoder = NMEADecoder(options: NMEAOptions())
        var out: [Position] = []
        Array(line.utf8).withUnsafeBytes { decoder.decode($0, into: &out) }
        #expect(decoder.takeAntennaReports() == (expected.map { [$0] } ?? []))
        #expect(decoder.statistics.wellFormed == 1, "the checksum is right and the sentence still counts")
        #expect(decoder.takeAntennaReports().isEmpty)
    }
}
