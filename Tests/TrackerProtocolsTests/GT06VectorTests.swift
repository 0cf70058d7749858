import GatewayCore
import Testing
@testable import TrackerProtocols

/// Every vector of `Fixtures/gt06.txt`, each with its stated outcome.
@Suite struct GT06VectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("gt06")) ?? []

    /// Outcome per vector. Positions: every frame whose ref-decode has a fix, plus the ones this
    /// codec reads a GPS block from although the reference did not (0xA4 V4 and V88, 0xA3 V95,
    /// 0x34 V121 and V122, 0x38 V8, 0x70 V73 and V182). `undecoded`: a position type whose GPS
    /// block is absent (V1, 5 bytes) or not a date (V10, and the model-specific layouts of V176
    /// XT40 and V179 QH302R, which Traccar reads only with a model override); still acknowledged.
    /// Rejected: the frames marked with a wrong CRC or length field. V152 is three whole frames.
    static let expected: [String: VectorExpectation] = [
        "V1": .control("undecoded"), "V2": .identification("864717003283581"), "V4": .positions(1),
        "V5": .control("rfid"), "V7": .control("info"), "V8": .positions(1), "V10": .control("undecoded"),
        "V11": .control("info"), "V13": .positions(1), "V14": .control("lbs"), "V16": .control("peripheral"),
        "V17": .control("heartbeat"), "V19": .positions(1), "V20": .control("info"), "V22": .positions(1),
        "V23": .control("wifi"), "V25": .positions(1), "V26": .positions(1), "V28": .control("alarm"),
        "V29": .positions(1), "V31": .control("serial"), "V32": .positions(1), "V34": .control("info"),
        "V35": .positions(1), "V37": .rejected("checksum"), "V38": .rejected("checksum"), "V40": .control("lbs"),
        "V41": .control("heartbeat"), "V43": .control("info"), "V44": .positions(1), "V46": .control("info"),
        "V47": .positions(1), "V49": .control("lbs"), "V50": .positions(1), "V52": .control("lbs"),
        "V53": .rejected("checksum"), "V55": .positions(1), "V56": .control("heartbeat"), "V58": .control("serial"),
        "V59": .control("obd"), "V61": .control("wifi"), "V62": .control("serial"), "V64": .control("info"),
        "V65": .positions(1), "V67": .control("info"), "V68": .positions(1), "V70": .control("alarm"),
        "V71": .rejected("stop_bytes"), "V73": .positions(1), "V74": .control("serial"), "V76": .positions(1),
        "V77": .rejected("length"), "V79": .control("obd"), "V80": .control("info"), "V82": .control("info"),
        "V83": .control("lbs"), "V85": .control("info"), "V86": .positions(1), "V88": .positions(1),
        "V89": .control("lbs"), "V91": .positions(1), "V92": .control("lbs"), "V94": .control("lbs"),
        "V95": .positions(1), "V97": .control("lbs"), "V98": .positions(1), "V100": .rejected("length"),
        "V101": .rejected("length"), "V103": .rejected("length"), "V104": .rejected("length"),
        "V106": .rejected("stop_bytes"), "V107": .rejected("stop_bytes"), "V109": .control("lbs"),
        "V110": .control("wifi"), "V112": .positions(1), "V113": .control("wifi"), "V115": .control("lbs"),
        "V116": .rejected("checksum"), "V118": .control("lbs"), "V119": .identification("863586038760942"),
        "V121": .positions(1), "V122": .positions(1), "V124": .positions(1), "V125": .positions(1),
        "V127": .control("info"), "V128": .control("info"), "V130": .control("info"), "V131": .control("info"),
        "V133": .control("info"), "V134": .control("info"), "V136": .positions(1), "V137": .control("string"),
        "V139": .control("string"), "V140": .identification("123456789012345"), "V142": .control("heartbeat"),
        "V143": .positions(1), "V145": .positions(1), "V146": .rejected("checksum"), "V148": .positions(1),
        "V149": .positions(1), "V151": .positions(1), "V152": .controls("unknown", count: 3), "V154": .positions(1),
        "V155": .identification("864717003664467"), "V157": .control("unknown"), "V158": .positions(1),
        "V160": .rejected("stop_bytes"), "V161": .rejected("length"), "V163": .control("address_request"),
        "V164": .control("time_request"), "V166": .rejected("checksum"), "V167": .rejected("checksum"),
        "V169": .rejected("checksum"), "V170": .control("heartbeat"), "V172": .control("heartbeat"),
        "V173": .control("heartbeat"), "V175": .rejected("checksum"), "V176": .control("undecoded"),
        "V178": .positions(1), "V179": .control("undecoded"), "V181": .positions(1), "V182": .positions(1),
        "V184": .control("status"), "V185": .control("status"), "V187": .positions(1),
    ]

    static func vector(_ id: String) -> TrackerVector? { vectors.first { $0.id == id } }

    static func decode(_ id: String) -> [CodecEvent] {
        var runner = CodecRunner(GT06Codec(limits: limits))
        return runner.feed(vector(id)?.frame ?? [])
    }

    static func position(_ id: String) -> Position? {
        decode(id).first?.message?.records?.positions.first
    }

    @Test func theFileHolds125VectorsAndEachHasAStatedOutcome() {
        let ids = Self.vectors.filter { $0.id.hasPrefix("V") }.map(\.id)
        #expect(ids.count == 125)
        #expect(Set(ids) == Set(Self.expected.keys))
    }

    @Test(arguments: expected.keys.sorted { $0.count == $1.count ? $0 < $1 : $0.count < $1.count })
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let expectation = try #require(Self.expected[id])
        let ref = try #require(vector.ref)
        var runner = CodecRunner(GT06Codec(limits: limits))
        let events = runner.feed(vector.frame)
        #expect(runner.consumedWasSane)
        let fixtureAnswer = vector.serverAnswerBytes

        switch expectation {
        case .identification(let imei):
            #expect(events == [.message(.identification(deviceID: imei, accepted: fixtureAnswer ?? [], refused: nil))])
        case .control(let kind):
            #expect(events.count == 1, "\(id): \(events)")
            let message = try #require(events.first?.message)
            #expect(message.controlKind == kind, "\(id): \(message)")
            if kind == "time_request" {
                #expect(message.answer == Self.timeAnswer(serial: [vector.frame[4], vector.frame[5]], now: runner.now))
            } else {
                #expect(message.answer == fixtureAnswer, "\(id): \(hex(message.answer)) expected \(hex(fixtureAnswer))")
            }
        case .controls(let kind, let count):
            #expect(events.count == count)
            for event in events {
                #expect(event.message?.controlKind == kind)
                #expect(event.message?.answer == nil)
            }
        case .positions(let count):
            guard events.count == 1, let records = events.first?.message?.records else {
                Issue.record("\(id): \(events)")
                return
            }
            #expect(records.positions.count == count)
            #expect(records.answer == fixtureAnswer, "\(id): \(hex(records.answer)) expected \(hex(fixtureAnswer))")
            #expect(records.deviceID == nil)
            if let fix = ref.ref, let position = records.positions.first { Self.check(position, fix, id) }
        case .rejected(let reason):
            #expect(events.allSatisfy { $0.message == nil })
            var padded = CodecRunner(GT06Codec(limits: limits))
            VectorCheck.rejected(padded.feed(vector.frame + [UInt8](repeating: 0, count: 64)), reason: reason, id)
            #expect(padded.events.allSatisfy { !$0.closes }, "GT06 resynchronises on markers: never close")
            #expect(!ref.isIntact, "\(id) is marked intact but rejected")
        }
    }

    static func check(_ position: Position, _ fix: RefDecode.Fix, _ id: String) {
        #expect(position.time == TrackerVectors.time(fix.time), "\(id): time \(String(describing: position.time))")
        VectorCheck.near(position.latitude, fix.lat, 1e-5, "latitude", id)
        VectorCheck.near(position.longitude, fix.lon, 1e-5, "longitude", id)
        VectorCheck.near(position.speed, (fix.speedKmh ?? .nan) / 3.6, 1e-9, "speed", id)
        VectorCheck.near(position.course, fix.course ?? .nan, 0, "course", id)
        #expect(position.satellites == fix.sats, "\(id): satellites")
        #expect(position.mode == (fix.valid ? .twoD : .noFix), "\(id): mode")
        if let ignition = fix.ignition {
            #expect(position.attributes["ignition"] == String(ignition), "\(id): ignition")
        }
    }

    static func timeAnswer(serial: [UInt8], now: Timestamp) -> [UInt8] {
        let c = now.components
        let body: [UInt8] = [0x0B, 0x8A, UInt8(c.year - 2000), UInt8(c.month), UInt8(c.day),
                             UInt8(c.hour), UInt8(c.minute), UInt8(c.second)] + serial
        let crc = CRC16.x25(body)
        return [0x78, 0x78] + body + [UInt8(crc >> 8), UInt8(crc & 0xFF), 0x0D, 0x0A]
    }

    @Test func timeRequestIsAnsweredWithTheServersUTCTime() throws {
        var runner = CodecRunner(GT06Codec(limits: limits),
                                 now: Timestamp(year: 2031, month: 12, day: 30, hour: 23, minute: 58, second: 59))
        let message = try #require(runner.feed(Self.vector("V164")?.frame ?? []).first?.message)
        // 78 78 0B 8A | 31 12 30 23 58 59 (decimal values as bytes) | serial 0006 | CRC | 0D 0A
        #expect(Array(message.answer?.prefix(12) ?? []) == [0x78, 0x78, 0x0B, 0x8A, 31, 12, 30, 23, 58, 59, 0x00, 0x06])
        #expect(message.answer?.suffix(2) == [0x0D, 0x0A])
    }

    @Test func statusBlocksGiveTheAlarmsTraccarsTestsAssert() {
        // Traccar asserts: V25 battery level 93, V26 SOS, V32 SOS (VXT01 layout, from the terminal
        // information bits), V44 tampering (alarm byte 0x25), V76 removing (terminal bits 7).
        #expect(Self.position("V25")?.attributes["battery_level"] == "93")
        #expect(Self.position("V25")?.attributes["alarm"] == "tampering")
        #expect(Self.position("V26")?.attributes["alarm"] == "sos")
        #expect(Self.position("V32")?.attributes["alarm"] == "sos")
        #expect(Self.position("V44")?.attributes["alarm"] == "tampering")
        #expect(Self.position("V76")?.attributes["alarm"] == "removing")
        // V65 (0x26): the cell length counts itself; status 0C 06 04 03 02 → vibration, charging,
        // level 6 = 100 %, GSM 4.
        let v65 = Self.position("V65")
        #expect(v65?.attributes["alarm"] == "vibration")
        #expect(v65?.attributes["charging"] == "true")
        #expect(v65?.attributes["battery_level"] == "100")
        #expect(v65?.attributes["gsm_signal"] == "4")
        // A model-dependent code stays raw (V178: G18 braking, jamming on other models).
        #expect(Self.position("V178")?.attributes["alarm"] == "alarm_30")
    }

    @Test func accByteOf0x22AndA0SetsIgnitionWhenTheCourseBitsDoNot() {
        // V86 and V98 (0x22): ACC 00; V112 (0x22): ACC 01; V29 (0xA0): ACC 00. Their course words
        // carry no ACC flag (bit 14 clear), so the reference leaves ignition unset.
        #expect(Self.position("V86")?.attributes["ignition"] == "false")
        #expect(Self.position("V98")?.attributes["ignition"] == "false")
        #expect(Self.position("V112")?.attributes["ignition"] == "true")
        #expect(Self.position("V29")?.attributes["ignition"] == "false")
    }

    @Test func framesTheReferenceDidNotReadDecodeToPlausibleFixes() throws {
        // 0xA4 V88: 2017-12-12 02:40:27, 0x026C1872 and 0x0C38D228 / 1.8e6: Shenzhen.
        // 0x34 V121: 2017-06-24 09:19:12, 0x03107D24 and 0x08488A58: Delhi.
        // 0x70 V73: module 0x33, 0x5D62BF3A = 2019-08-25 17:02:50 UTC, near Toronto, altitude 232 m.
        let v88 = try #require(Self.position("V88"))
        #expect(v88.time == Timestamp(year: 2017, month: 12, day: 12, hour: 2, minute: 40, second: 27))
        VectorCheck.near(v88.latitude, 0x026C1872 / 1.8e6, 1e-9, "latitude", "V88")
        VectorCheck.near(v88.longitude, 0x0C38D228 / 1.8e6, 1e-9, "longitude", "V88")
        let v121 = try #require(Self.position("V121"))
        #expect(v121.time == Timestamp(year: 2017, month: 6, day: 24, hour: 9, minute: 19, second: 12))
        VectorCheck.near(v121.latitude, 0x03107D24 / 1.8e6, 1e-9, "latitude", "V121")
        VectorCheck.near(v121.longitude, 0x08488A58 / 1.8e6, 1e-9, "longitude", "V121")
        let v73 = try #require(Self.position("V73"))
        #expect(v73.time == Timestamp(year: 2019, month: 8, day: 25, hour: 17, minute: 2, second: 50))
        VectorCheck.near(v73.latitude, 0x04B59943 / 1.8e6, 1e-9, "latitude", "V73")
        VectorCheck.near(v73.longitude, -0x08814A87 / 1.8e6, 1e-9, "longitude", "V73")
        #expect(v73.altitude == 232)
        #expect(v73.mode == .twoD)
    }

    /// 0x32 with a fix (no such frame in the file: V115 and V118 have a GPS length of 0, so no
    /// fix): a 78 78 frame holds the standard GPS block, a 79 79 (AZ735) one the block with a
    /// length byte. Both are positions; the 78 78 one is answered once handled, the 79 79 one
    /// not at all (extended frames other than 0x94 are not acknowledged).
    @Test func type0x32WithAFixIsAPosition() throws {
        let time: [UInt8] = [0x18, 0x03, 0x14, 0x0A, 0x21, 0x05]  // 2024-03-20 10:33:05
        let latitude = UInt32(22.5431 * 1_800_000), longitude = UInt32(114.0579 * 1_800_000)
        var fix = [UInt8]()
        for value in [latitude, longitude] { fix += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        fix += [0x2A, 0x14, 0x5A]  // 42 km/h, positioned, north, east, course 90
        let cells: [UInt8] = [0x09, 0x01, 0xCC, 0x00, 0x28, 0x7D, 0x00, 0x1F, 0x71, 0x00, 0x06, 0x04, 0x00, 0x01]
        let standard = GT06Codec.frame(0x32, content: time + [0xC9] + fix + cells, serial: 0x0042)
        var runner = CodecRunner(GT06Codec(limits: limits))
        let records = try #require(runner.feed(standard).first?.message?.records)
        #expect(records.answer == GT06Codec.acknowledgement(0x32, serial: 0x0042))
        // The AZ735 layout: time, GPS length 12, satellites, then the same fix.
        var body: [UInt8] = [0x00, 0x00, 0x32] + time + [0x0C, 0x09] + fix + cells + [0x00, 0xB2]
        body[1] = UInt8(body.count - 2 + 2)
        let crc = CRC16.x25(body)
        let extended = [0x79, 0x79] + body + [UInt8(crc >> 8), UInt8(crc & 0xFF), 0x0D, 0x0A]
        var az735 = CodecRunner(GT06Codec(limits: limits))
        let other = try #require(az735.feed(extended).first?.message?.records, "\(az735.events)")
        #expect(other.answer == nil)
        for position in [records.positions.first, other.positions.first] {
            let p = try #require(position)
            #expect(p.time == Timestamp(year: 2024, month: 3, day: 20, hour: 10, minute: 33, second: 5))
            VectorCheck.near(p.latitude, Double(latitude) / 1_800_000, 1e-9, "latitude", "0x32")
            VectorCheck.near(p.longitude, Double(longitude) / 1_800_000, 1e-9, "longitude", "0x32")
            VectorCheck.near(p.speed, 42 / 3.6, 1e-9, "speed", "0x32")
            #expect(p.course == 90 && p.satellites == 9 && p.mode == .twoD)
        }
    }

    @Test func theDeviceTimeZoneIsSubtracted() throws {
        var runner = CodecRunner(GT06Codec(limits: limits, timeZoneOffsetSeconds: 8 * 3600))
        let position = try #require(runner.feed(Self.vector("V13")?.frame ?? []).first?.message?.records?.positions.first)
        #expect(position.time == Timestamp(year: 2024, month: 11, day: 15, hour: 7, minute: 52, second: 7))
    }

    @Test func framingVectorsGiveTheExpectedFirstFrame() throws {
        // Traccar's Gt06FrameDecoderTest streams. Those whose length field is right are one frame
        // each; the rest (length 3 or 0 with the stop bytes elsewhere) are not frames here.
        for stream in Self.vectors where stream.id.hasPrefix("F") {
            #expect(stream.expectedFrame == stream.frame, "\(stream.id): the expected frame is the whole stream")
            var runner = CodecRunner(GT06Codec(limits: limits))
            let events = runner.feed(stream.frame)
            let intact = [UInt8](stream.frame.prefix(3)).last.map { Int($0) + 5 } == stream.frame.count
            if intact {
                #expect(events.count == 1 && events.first?.message != nil, "\(stream.id): \(events)")
            } else {
                #expect(events.allSatisfy { $0.message == nil }, "\(stream.id): \(events)")
            }
        }
    }
}
