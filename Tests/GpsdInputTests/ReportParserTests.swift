import GatewayCore
@testable import GpsdInput
import Testing

@Suite struct ReportParserTests {
    static func parse(_ text: String) throws -> GpsdReport { try GpsdReportParser.parse(Array(text.utf8)) }

    @Test func tpvFieldsMapOntoPositionFields() throws {
        let r = try Self.parse(#"{"class":"TPV","device":"/dev/ttyACM0","status":2,"mode":3,"time":"2020-03-18T13:28:20.600Z","lat":41.574970205,"lon":-93.750558641,"altHAE":250.1,"altMSL":278.02,"alt":278.02,"speed":1.673,"track":92.308,"eph":4.75,"epv":6.5,"eps":0.35,"epd":12.5,"dgpsAge":3,"climb":0.1}"#)
        guard case .tpv(let t) = r else { Issue.record("not a TPV: \(r)"); return }
        #expect(t.device == "/dev/ttyACM0")
        #expect(t.time == Timestamp(iso8601: "2020-03-18T13:28:20.600Z"))
        #expect(t.mode == .threeD)
        #expect(t.status == .dgps)
        #expect(t.latitude == 41.574970205 && t.longitude == -93.750558641)
        #expect(t.altitude == 278.02)
        #expect(t.speed == 1.673 && t.track == 92.308)
        #expect(t.horizontalError == 4.75 && t.verticalError == 6.5)
        #expect(t.detail == FixDetail(ellipsoidHeight: 250.1, speedError: 0.35, courseError: 12.5, correctionAge: 3))
    }

    @Test func missingFieldsStayAbsentAndAltFallsBack() throws {
        guard case .tpv(let t) = try Self.parse(#"{"class":"TPV","mode":2,"lat":1.5,"lon":2.5,"alt":12.0,"epx":3,"epy":4}"#) else { Issue.record(); return }
        #expect(t.device == nil && t.time == nil && t.status == nil && t.speed == nil && t.track == nil && t.verticalError == nil)
        #expect(t.altitude == 12.0)
        #expect(t.detail.isEmpty)
        #expect(t.horizontalError == 5.0)  // length of (epx, epy)
    }

    @Test(arguments: [
        #"{"class":"TPV","mode":3,"lat":"NaN","lon":1,"speed":null,"track":"x"}"#,
        #"{"class":"TPV","mode":3,"lat":91,"lon":1}"#,
        #"{"class":"TPV","mode":3,"lon":1}"#,
    ])
    func nonNumericOrOutOfRangeCoordinatesAreAbsent(line: String) throws {
        guard case .tpv(let t) = try Self.parse(line) else { Issue.record(); return }
        #expect(t.latitude == nil && t.longitude == nil && t.speed == nil && t.track == nil)
    }

    @Test func statusUsesGpsdNumbering() throws {
        for q in FixQuality.allCases {
            guard case .tpv(let t) = try Self.parse(#"{"class":"TPV","mode":3,"status":\#(q.rawValue)}"#) else { Issue.record(); return }
            #expect(t.status == q)
        }
    }

    @Test func skyGivesUsedSatellitesAndDops() throws {
        guard case .sky(let s) = try Self.parse(#"{"class":"SKY","device":"d","hdop":0.9,"vdop":1.2,"pdop":1.5,"uSat":7,"satellites":[{"PRN":1,"used":true}]}"#) else { Issue.record(); return }
        #expect(s.device == "d" && s.satellitesUsed == 7 && s.hdop == 0.9 && s.vdop == 1.2 && s.pdop == 1.5)
        guard case .sky(let old) = try Self.parse(#"{"class":"SKY","satellites":[{"PRN":1,"used":true},{"PRN":2,"used":false},{"PRN":3,"used":true}]}"#) else { Issue.record(); return }
        #expect(old.satellitesUsed == 2 && old.hdop == nil)
    }

    /// A count no receiver reports is left out: written as `uSat`, locgate's own JSON readers
    /// would refuse it (Position.maximumSatellites).
    @Test func aSatelliteCountBeyondTheMaximumIsLeftOut() throws {
        guard case .sky(let s) = try Self.parse(#"{"class":"SKY","uSat":1000}"#) else { Issue.record(); return }
        #expect(s.satellitesUsed == nil)
        guard case .sky(let top) = try Self.parse(#"{"class":"SKY","uSat":999}"#) else { Issue.record(); return }
        #expect(top.satellitesUsed == 999)
    }

    @Test func otherClassesAreRecognisedAndSkipped() throws {
        #expect(try Self.parse(#"{"class":"VERSION","release":"3.22"}"#) == .other(className: "VERSION", message: "3.22"))
        #expect(try Self.parse(#"{"class":"GST","device":"x"}"#) == .other(className: "GST", message: nil))
    }

    @Test(arguments: [#"{"class":"TPV","#, "garbage", #"["TPV"]"#, #"{"mode":3}"#, "{\"class\":\"TPV\"}}"])
    func malformedLinesThrow(line: String) {
        #expect(throws: GpsdReportError.self) { try Self.parse(line) }
    }
}

@Suite struct LineFramerTests {
    static func lines(_ chunks: [[UInt8]], max: Int = 64 * 1024) -> (lines: [String], tooLong: Int, pending: Int) {
        var framer = GpsdLineFramer(maxLineLength: max)
        var out: [String] = []
        for c in chunks { c.withUnsafeBytes { framer.feed($0) { out.append(String(decoding: $0, as: UTF8.self)) } } }
        return (out, framer.tooLong, framer.pendingCount)
    }

    @Test func anyChunkingGivesTheSameLines() {
        let text = Array("{\"a\":1}\r\n\r\n{\"b\":2}\n$GPGGA,1*00\r\n".utf8)
        let whole = Self.lines([text]).lines
        #expect(whole == ["{\"a\":1}", "{\"b\":2}", "$GPGGA,1*00"])
        for size in 1...7 {
            let chunks = stride(from: 0, to: text.count, by: size).map { Array(text[$0..<min($0 + size, text.count)]) }
            #expect(Self.lines(chunks).lines == whole)
        }
    }

    @Test func overLongLinesAreCountedSkippedAndDoNotGrowMemory() {
        // 1 MB without a newline, in 16 KB reads, then a good line.
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 16 * 1024)
        var chunks = Array(repeating: chunk, count: 64)
        chunks.append(Array("tail\n{\"ok\":1}\n".utf8))
        var framer = GpsdLineFramer()
        var out: [String] = []
        var maxPending = 0
        for c in chunks {
            c.withUnsafeBytes { framer.feed($0) { out.append(String(decoding: $0, as: UTF8.self)) } }
            maxPending = max(maxPending, framer.pendingCount)
        }
        #expect(out == ["{\"ok\":1}"])
        #expect(framer.tooLong == 1)
        #expect(maxPending <= 64 * 1024)
        // A long line inside one read is caught too.
        #expect(Self.lines([Array((String(repeating: "y", count: 100) + "\nok\n").utf8)], max: 50) == (["ok"], 1, 0))
    }
}

@Suite struct EpochMergerTests {
    static func tpv(_ time: Int64?, device: String? = "A", lat: Double = 1, mode: FixMode = .threeD) -> GpsdTPV {
        GpsdTPV(device: device, time: time.map { Timestamp(milliseconds: $0) }, mode: mode, latitude: lat, longitude: 2)
    }

    @Test func lastTPVOfAnEpochWinsAndIsEmittedWhenTheTimeChanges() {
        var m = GpsdEpochMerger(source: "g", defaultDevice: nil)
        var out: [Position] = []
        let now = MonotonicInstant(sinceOrigin: .seconds(100))
        m.add(Self.tpv(1000, lat: 1, mode: .twoD), now: now, into: &out)
        m.add(Self.tpv(1000, lat: 1.5), now: now, into: &out)
        #expect(out.isEmpty)
        m.add(Self.tpv(2000, lat: 2), now: now, into: &out)
        #expect(out.count == 1)
        #expect(out.first?.latitude == 1.5 && out.first?.mode == .threeD)
        #expect(out.first?.id == "g-A-1000" && out.first?.device == "A" && out.first?.source == "g")
    }

    @Test func devicesAreMergedSeparately() {
        var m = GpsdEpochMerger(source: "g", defaultDevice: nil)
        var out: [Position] = []
        let now = MonotonicInstant(sinceOrigin: .seconds(100))
        m.add(Self.tpv(1000, device: "A"), now: now, into: &out)
        m.add(Self.tpv(1000, device: "B"), now: now, into: &out)
        m.add(Self.tpv(2000, device: "A"), now: now, into: &out)
        #expect(out.map(\.id) == ["g-A-1000"])
        m.flushAll(into: &out)
        #expect(out.map(\.id) == ["g-A-1000", "g-A-2000", "g-B-1000"])
    }

    @Test func idleFlushReleasesTheLastEpoch() {
        var m = GpsdEpochMerger(source: "g", defaultDevice: nil)
        var out: [Position] = []
        let t0 = MonotonicInstant(sinceOrigin: .seconds(100))
        m.add(Self.tpv(1000), now: t0, into: &out)
        m.flushIdle(now: t0 + .milliseconds(500), idle: .seconds(1), into: &out)
        #expect(out.isEmpty)
        m.flushIdle(now: t0 + .seconds(1), idle: .seconds(1), into: &out)
        #expect(out.count == 1)
        // A late TPV of the emitted epoch does not make a second position with the same id.
        m.add(Self.tpv(1000), now: t0, into: &out)
        m.flushAll(into: &out)
        #expect(out.count == 1 && m.late == 1)
    }

    @Test func skyGoesToTheNextTPVOfItsDevice() {
        var m = GpsdEpochMerger(source: "g", defaultDevice: nil)
        var out: [Position] = []
        let now = MonotonicInstant(sinceOrigin: .seconds(100))
        m.add(GpsdSky(device: "A", satellitesUsed: 9, hdop: 0.8, vdop: 1.1, pdop: 1.4))
        m.add(GpsdSky(device: "B", satellitesUsed: 3, hdop: 9, vdop: 9, pdop: 9))
        m.add(Self.tpv(1000), now: now, into: &out)
        m.add(Self.tpv(2000), now: now, into: &out)
        m.flushAll(into: &out)
        #expect(out.count == 2)
        #expect(out[0].satellites == 9 && out[0].hdop == 0.8 && out[0].vdop == 1.1 && out[0].pdop == 1.4)
        #expect(out[1].satellites == nil && out[1].hdop == nil)
    }

    @Test func aRepeatedEpochIsDroppedSoIdsStayUnique() {
        var m = GpsdEpochMerger(source: "g", defaultDevice: nil)
        var out: [Position] = []
        let now = MonotonicInstant(sinceOrigin: .seconds(100))
        for t: Int64 in [1000, 2000, 3000, 1000, 2000, 4000] { m.add(Self.tpv(t), now: now, into: &out) }
        m.flushAll(into: &out)
        #expect(out.map(\.id) == ["g-A-1000", "g-A-2000", "g-A-3000", "g-A-4000"])
        #expect(m.late == 2)
    }

    @Test func tpvsWithoutTimeAreCountedNotEmitted() {
        var m = GpsdEpochMerger(source: "g", defaultDevice: nil)
        var out: [Position] = []
        m.add(Self.tpv(nil), now: MonotonicInstant(sinceOrigin: .zero), into: &out)
        m.flushAll(into: &out)
        #expect(out.isEmpty && m.untimed == 1)
    }
}
