import GatewayCore
import Testing
import TrackerProtocols

/// Frames built here with known values and correct checksums decode to exactly those values.
@Suite struct EncodedFrameTests {
    // MARK: - Teltonika

    /// One AVL record to encode.
    struct Record {
        var milliseconds: Int64
        var priority: UInt8
        var longitude: Int32
        var latitude: Int32
        var altitude: Int16
        var angle: UInt16
        var satellites: UInt8
        var speed: UInt16
        var eventID: UInt16
        /// (id, width in bytes, value)
        var io: [(UInt16, Int, UInt64)]
        var variable: [(UInt16, [UInt8])] = []
    }

    static func be(_ value: UInt64, _ width: Int) -> [UInt8] {
        (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(width - 1 - $0))) }
    }

    /// The AVL data (codec … N2) of `records` in `codec` (0x08, 0x8E or 0x10).
    static func avlData(codec: UInt8, _ records: [Record]) -> [UInt8] {
        let idWidth = codec == 0x08 ? 1 : 2
        let countWidth = codec == 0x8E ? 2 : 1
        var out: [UInt8] = [codec, UInt8(records.count)]
        for r in records {
            out += be(UInt64(r.milliseconds), 8) + [r.priority]
            out += be(UInt64(UInt32(bitPattern: r.longitude)), 4) + be(UInt64(UInt32(bitPattern: r.latitude)), 4)
            out += be(UInt64(UInt16(bitPattern: r.altitude)), 2) + be(UInt64(r.angle), 2) + [r.satellites]
            out += be(UInt64(r.speed), 2) + be(UInt64(r.eventID), idWidth)
            if codec == 0x10 { out.append(0x01) }  // generation type: on change
            out += be(UInt64(r.io.count + r.variable.count), countWidth)
            for width in [1, 2, 4, 8] {
                let group = r.io.filter { $0.1 == width }
                out += be(UInt64(group.count), countWidth)
                for (id, _, value) in group { out += be(UInt64(id), idWidth) + be(value, width) }
            }
            if codec == 0x8E {
                out += be(UInt64(r.variable.count), 2)
                for (id, bytes) in r.variable { out += be(UInt64(id), 2) + be(UInt64(bytes.count), 2) + bytes }
            }
        }
        out.append(UInt8(records.count))
        return out
    }

    static func tcpFrame(_ data: [UInt8]) -> [UInt8] {
        [0, 0, 0, 0] + be(UInt64(data.count), 4) + data + be(UInt64(CRC16.arc(data)), 4)
    }

    static let records = [
        Record(milliseconds: 1_700_000_000_123, priority: 2, longitude: -706_123_456, latitude: -334_567_890,
               altitude: -12, angle: 359, satellites: 11, speed: 90, eventID: 239,
               io: [(239, 1, 1), (240, 1, 0), (21, 1, 4), (66, 2, 12_345), (9, 2, 7), (181, 2, 13), (182, 2, 9),
                    (16, 4, 123_456_789), (199, 4, 42), (78, 8, 0x0123_4567_89AB_CDEF), (200, 1, 2)]),
        Record(milliseconds: 1_700_000_060_000, priority: 0, longitude: 1_800_000_000, latitude: 900_000_000,
               altitude: 8_848, angle: 0, satellites: 0, speed: 0, eventID: 0, io: []),
    ]

    static func checkTeltonika(_ positions: [Position], extended: Bool) {
        #expect(positions.count == 2)
        guard positions.count == 2 else { return }
        let p = positions[0]
        #expect(p.time == Timestamp(milliseconds: 1_700_000_000_123))
        #expect(p.latitude == -33.456789)
        #expect(p.longitude == -70.6123456)
        #expect(p.altitude == -12)
        #expect(p.course == 359)
        #expect(p.satellites == 11)
        VectorCheck.near(p.speed, 25, 1e-12, "speed", "encoded")
        #expect(p.mode == .threeD)
        #expect(p.pdop == 1.3)
        #expect(p.hdop == 0.9)
        var attributes = [
            "priority": "2", "event_io": "239", "ignition": "true", "movement": "false", "gsm_signal": "4",
            "external_voltage": "12.345", "ain1": "0.007", "odometer": "123456789", "trip_odometer": "42",
            "io.78": String(UInt64(0x0123_4567_89AB_CDEF)), "sleep_mode": "2",
        ]
        if extended { attributes["io.1234"] = "00ff10" }
        #expect(p.attributes == attributes)
        let q = positions[1]
        #expect(q.latitude == 90)
        #expect(q.longitude == 180)
        #expect(q.altitude == 8_848)
        #expect(q.mode == .noFix, "0 satellites: no valid fix, coordinates kept")
        #expect(q.attributes == ["priority": "0"])
    }

    @Test(arguments: [UInt8(0x08), 0x8E, 0x10])
    func teltonikaFramesDecodeToTheEncodedRecords(codec: UInt8) throws {
        var records = Self.records
        if codec == 0x8E { records[0].variable = [(1234, [0x00, 0xFF, 0x10])] }
        let frame = Self.tcpFrame(Self.avlData(codec: codec, records))
        var runner = TeltonikaVectorTests.identifiedRunner()
        let result = try #require(runner.feed(frame).first?.message?.records)
        Self.checkTeltonika(result.positions, extended: codec == 0x8E)
        #expect(result.answer == [0, 0, 0, 2])
        #expect(result.deviceID == nil)
    }

    @Test func teltonikaUDPDatagramNamesTheDeviceAndEchoesThePacketID() throws {
        let imei = Array("356307042441013".utf8)
        let body: [UInt8] = [0xBE, 0xEF, 0x01, 0x07] + Self.be(UInt64(imei.count), 2) + imei
            + Self.avlData(codec: 0x08, Self.records)
        let datagram = Self.be(UInt64(body.count), 2) + body
        var codec = TeltonikaCodec(transport: .udp, limits: limits)
        let result = datagram.withUnsafeBytes { codec.decode($0, now: Timestamp(milliseconds: 0)) }
        guard case .message(.records(let records), let consumed) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(consumed == datagram.count)
        #expect(records.deviceID == "356307042441013")
        #expect(records.answer == [0x00, 0x05, 0xBE, 0xEF, 0x01, 0x07, 0x02])
        Self.checkTeltonika(records.positions, extended: false)

        // One byte short: the length field no longer matches.
        let short = Array(datagram.dropLast())
        let bad = short.withUnsafeBytes { codec.decode($0, now: Timestamp(milliseconds: 0)) }
        guard case .invalid(let error, let n, false) = bad else {
            Issue.record("\(bad)")
            return
        }
        #expect(error.reason == "length" && n == short.count)
    }

    @Test func teltonikaChecksFailingOnAnIntactCRCAreRejected() {
        // N1 ≠ N2, a record that overruns the data, bytes after the last record: each with a right CRC.
        var data = Self.avlData(codec: 0x08, Self.records)
        data[data.count - 1] = 3
        var runner = TeltonikaVectorTests.identifiedRunner()
        #expect(runner.feed(Self.tcpFrame(data)) == [.invalid(reason: "syntax", close: true)])

        data = Self.avlData(codec: 0x08, Self.records)
        data.insert(0x00, at: data.count - 1)
        runner = TeltonikaVectorTests.identifiedRunner()
        #expect(runner.feed(Self.tcpFrame(data)) == [.invalid(reason: "syntax", close: true)])

        data = Self.avlData(codec: 0x08, Self.records)
        data.remove(at: data.count - 2)
        runner = TeltonikaVectorTests.identifiedRunner()
        #expect(runner.feed(Self.tcpFrame(data)) == [.invalid(reason: "syntax", close: true)])

        data = Self.avlData(codec: 0x09, Self.records)
        runner = TeltonikaVectorTests.identifiedRunner()
        #expect(runner.feed(Self.tcpFrame(data)) == [.invalid(reason: "unsupported", close: true)])
    }

    // MARK: - GT06

    static func gt06Frame(_ protocolNumber: UInt8, _ content: [UInt8], serial: UInt16) -> [UInt8] {
        let body = [UInt8(5 + content.count), protocolNumber] + content + be(UInt64(serial), 2)
        return [0x78, 0x78] + body + be(UInt64(CRC16.x25(body)), 2) + [0x0D, 0x0A]
    }

    /// 2024-02-29 23:59:58, 9 satellites, 51.5007° S, 0.1246° W, 73 km/h, course 271, positioned,
    /// ACC flag set and on.
    static let gpsBlock: [UInt8] = [24, 2, 29, 23, 59, 58, 0xC9]
        + be(UInt64((51.5007 * 1_800_000).rounded()), 4) + be(UInt64((0.1246 * 1_800_000).rounded()), 4)
        + [73] + be(UInt64(0x4000 | 0x8000 | 0x1000 | 0x0800 | 271), 2)
    static let cell: [UInt8] = [0x00, 0xEA, 0x0A, 0x12, 0x34, 0x00, 0x56, 0x78]

    static func checkGPS(_ p: Position) {
        #expect(p.time == Timestamp(year: 2024, month: 2, day: 29, hour: 23, minute: 59, second: 58))
        #expect(p.satellites == 9)
        VectorCheck.near(p.latitude, -51.5007, 1e-9, "latitude", "encoded")
        VectorCheck.near(p.longitude, -0.1246, 1e-9, "longitude", "encoded")
        VectorCheck.near(p.speed, 73 / 3.6, 1e-12, "speed", "encoded")
        #expect(p.course == 271)
        #expect(p.mode == .twoD)
        #expect(p.attributes["ignition"] == "true")
    }

    @Test func gt06PositionFrame0x12DecodesToTheEncodedFix() throws {
        let frame = Self.gt06Frame(0x12, Self.gpsBlock + Self.cell, serial: 0x1234)
        var runner = CodecRunner(GT06Codec(limits: limits))
        let records = try #require(runner.feed(frame).first?.message?.records)
        Self.checkGPS(try #require(records.positions.first))
        #expect(records.answer == Self.gt06Frame(0x12, [], serial: 0x1234))
        #expect(records.answer == [0x78, 0x78, 0x05, 0x12, 0x12, 0x34] + Self.be(UInt64(CRC16.x25([0x05, 0x12, 0x12, 0x34])), 2) + [0x0D, 0x0A])
    }

    @Test func gt06AlarmFrame0x16DecodesToTheEncodedFixAndStatus() throws {
        // Terminal information: ACC off (ignored: the course word says on), charging, SOS bits;
        // voltage level 3, GSM 2, alarm byte 0x06 (overspeed wins over the bits), language 2.
        let status: [UInt8] = [0b0010_0100, 3, 2, 0x06, 0x02]
        let frame = Self.gt06Frame(0x16, Self.gpsBlock + [8] + Self.cell + status, serial: 7)
        var runner = CodecRunner(GT06Codec(limits: limits))
        let records = try #require(runner.feed(frame).first?.message?.records)
        let p = try #require(records.positions.first)
        Self.checkGPS(p)
        #expect(p.attributes["alarm"] == "overspeed")
        #expect(p.attributes["charging"] == "true")
        #expect(p.attributes["battery_level"] == "50")
        #expect(p.attributes["gsm_signal"] == "2")
        #expect(records.answer == Self.gt06Frame(0x16, [], serial: 7))

        // Without the alarm byte the terminal bits give the alarm; without the course's ACC flag
        // the terminal bit gives ignition.
        var block = Self.gpsBlock
        block[16] &= 0x3F
        let bits = Self.gt06Frame(0x16, block + [8] + Self.cell + [0b0010_0110, 6, 4, 0x00, 0x02], serial: 8)
        let q = try #require(runner.feed(bits).first?.message?.records?.positions.first)
        #expect(q.attributes["alarm"] == "sos")
        #expect(q.attributes["ignition"] == "true")
        #expect(q.attributes["battery_level"] == "100")
    }

    @Test func gt06UnknownAlarmCodesStayRaw() throws {
        let frame = Self.gt06Frame(0x16, Self.gpsBlock + [8] + Self.cell + [0, 1, 1, 0x7B, 2], serial: 1)
        var runner = CodecRunner(GT06Codec(limits: limits))
        let p = try #require(runner.feed(frame).first?.message?.records?.positions.first)
        #expect(p.attributes["alarm"] == "alarm_7b")
    }

    @Test func gt06LoginOf0x79FramesIsAnsweredWith0x78() throws {
        let content: [UInt8] = [0x03, 0x53, 0x41, 0x90, 0x81, 0x23, 0x45, 0x67]
        let body = [UInt8(0), UInt8(5 + content.count), 0x01] + content + [0x00, 0x2A]
        let frame = [0x79, 0x79] + body + Self.be(UInt64(CRC16.x25(body)), 2) + [0x0D, 0x0A]
        var runner = CodecRunner(GT06Codec(limits: limits))
        let events = runner.feed(frame)
        #expect(events == [.message(.identification(deviceID: "353419081234567",
                                                     accepted: Self.gt06Frame(0x01, [], serial: 0x2A), refused: nil))])
    }
}
