import GatewayCore

/// The GT06 protocol of Concox / Jimi IoT and the many trackers that copy it (GT06N, JM-VL03,
/// VL103, GK310, AZ735, ...): binary frames between start markers, each checked by a CRC.
///
///     78 78 [length: 1] [protocol] [content…] [serial: 2] [CRC: 2] 0D 0A     frame = length + 5 bytes
///     79 79 [length: 2] [protocol] [content…] [serial: 2] [CRC: 2] 0D 0A     frame = length + 6 bytes
///
/// The length counts protocol … CRC (at least 5); the CRC is CRC-16/X-25 (``CRC16/x25(_:)``)
/// over length … serial. A frame is valid when its length is in bounds, its stop bytes sit
/// where the length says and its CRC matches. Bytes before a start marker are skipped up to the
/// next `78 78` / `79 79`; a frame with a bad CRC is skipped whole, one whose stop bytes are not
/// where its length says is skipped up to the next marker. The stream always resynchronises on
/// markers, so no invalid frame asks to close the connection.
///
/// Answers: the standard acknowledgement `78 78 05 <protocol> <serial> <CRC> 0D 0A` (always a
/// `78 78` frame, also for `79 79` ones) for every `78 78` frame except command replies
/// (0x80–0x82) and the time request (0x8A), which gets `78 78 0B 8A YY MM DD hh mm ss <serial>
/// <CRC> 0D 0A` with the server's UTC time. Of the `79 79` frames only information (0x94) is
/// acknowledged; the others (extended types such as 0x70, 0x9B, 0xF2) are not.
///
/// Messages:
/// - Login (0x01): the IMEI, 8 bytes of BCD with its leading 0 dropped → `.identification`.
/// - Positions: every type whose content starts with a GPS block (0x10, 0x11, 0x12, 0x16, 0x1A,
///   0x1E, 0x22, 0x26, 0x27, 0x2D, 0x31, 0x32, 0x37, 0x38, 0xA0, 0xA3, 0xA4; 0xA2 when its content
///   holds a GPS block rather than cell towers; 0x34 after 4 bytes of flags), the modular
///   frame 0x70 through its GPS module 0x33, and the `79 79` 0x32 of AZ735 devices (its GPS
///   block has a length byte after the time: 0 means no fix, a `.control("lbs")`) → `.records`
///   with one position.
///   A GPS block whose date or coordinates are out of range is `.control("undecoded")`.
/// - Heartbeats (0x13, 0x23) → `.control("heartbeat")`; everything else → `.control` with a
///   short kind (`lbs`, `wifi`, `info`, `string`, `alarm`, `serial`, `unknown`, ...).
///
/// GPS block: `YY MM DD hh mm ss` (device time: minus ``timeZoneOffsetSeconds`` is UTC),
/// one byte (GPS information length in the high nibble, satellites in the low nibble),
/// latitude and longitude as uint32 in 1/1,800,000 degree, speed 1 byte km/h, then 2 bytes of
/// course and status: course in the low 10 bits, bit 10 set = north, bit 11 set = west,
/// bit 12 set = positioned (valid), bit 14 set = bit 15 is the ACC (ignition) state.
/// A fix that is not positioned keeps its coordinates with mode `.noFix`; a positioned one is
/// `.twoD` (the block has no altitude).
///
/// Attributes, where the layout has them: `ignition` (course bits 14/15 first, else the ACC
/// byte of 0x22 / 0xA0, else the ACC bit of the terminal information byte), and from the
/// status block of 0x16 / 0x26 / 0x27: `alarm` (the alarm byte, else the terminal
/// information's alarm bits), `charging`, `gsm_signal` (0–4), `battery_level` (percent).
public struct GT06Codec: TrackerCodec {
    /// Bounds on frame sizes.
    public let limits: TrackerLimits
    /// The device's clock offset from UTC in seconds (device time − offset = UTC); 0 for devices set to UTC.
    public let timeZoneOffsetSeconds: Int
    /// The serial of the next command sent on the connection (0 first).
    var commandSerial: UInt16 = 0

    /// A codec for one connection.
    public init(limits: TrackerLimits, timeZoneOffsetSeconds: Int = 0) {
        self.limits = limits
        self.timeZoneOffsetSeconds = timeZoneOffsetSeconds
    }

    /// Decodes the frame at the start of `bytes`; see the type's documentation.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        guard bytes.count >= 2 else {
            if let first = bytes.first, first != 0x78, first != 0x79 {
                return .invalid(TrackerFrameError("syntax", "byte before a start marker"), consumed: 1, close: false)
            }
            return .needMore
        }
        guard bytes[0] == bytes[1], bytes[0] == 0x78 || bytes[0] == 0x79 else {
            return Self.skipToMarker(bytes, from: 1, TrackerFrameError("syntax", "bytes before a start marker"))
        }
        let extended = bytes[0] == 0x79
        let headerSize = extended ? 4 : 3
        guard let length = bigEndian(bytes, at: 2, width: extended ? 2 : 1).map(Int.init) else { return .needMore }
        let total = length + (extended ? 6 : 5)
        if total > limits.maxFrameBytes {
            return Self.skipToMarker(bytes, from: 2, TrackerFrameError("too_large", "frame of \(total) bytes"))
        }
        guard length >= 5 else {
            return Self.skipToMarker(bytes, from: 2, TrackerFrameError("length", "length field \(length)"))
        }
        guard bytes.count >= total else { return .needMore }
        guard bytes[total - 2] == 0x0D, bytes[total - 1] == 0x0A else {
            return Self.skipToMarker(bytes, from: 2, TrackerFrameError("stop_bytes", "no 0D 0A where the length says"))
        }
        let crcField = UInt16(bytes[total - 4]) << 8 | UInt16(bytes[total - 3])
        let crc = CRC16.x25(bytes[2..<(total - 4)])
        guard crc == crcField else {
            return .invalid(TrackerFrameError("checksum", "CRC field \(crcField) but the frame gives \(crc)"),
                            consumed: total, close: false)
        }
        let frame = Frame(
            extended: extended, protocolNumber: bytes[headerSize],
            serial: UInt16(bytes[total - 6]) << 8 | UInt16(bytes[total - 5]),
            content: UnsafeRawBufferPointer(rebasing: bytes[(headerSize + 1)..<(total - 6)]))
        switch decodeFrame(frame, now: now) {
        case .success(let message): return .message(message, consumed: total)
        case .failure(let error): return .invalid(error, consumed: total, close: false)
        }
    }

    /// Skips to the next `78 78` / `79 79` at or after `start`; keeps a last byte that may begin one.
    static func skipToMarker(_ bytes: UnsafeRawBufferPointer, from start: Int, _ error: TrackerFrameError) -> TrackerDecodeResult {
        var index = max(1, start)
        while index + 1 < bytes.count {
            if bytes[index] == bytes[index + 1], bytes[index] == 0x78 || bytes[index] == 0x79 {
                return .invalid(error, consumed: index, close: false)
            }
            index += 1
        }
        let last = bytes[bytes.count - 1]
        let keep = last == 0x78 || last == 0x79 ? 1 : 0
        return .invalid(error, consumed: max(1, bytes.count - keep), close: false)
    }

    // MARK: - Frames

    /// A checked frame: what is between the length field and the serial.
    struct Frame {
        var extended: Bool
        var protocolNumber: UInt8
        var serial: UInt16
        var content: UnsafeRawBufferPointer

        /// The standard acknowledgement, or nil where the device expects none (see the type's documentation).
        var answer: [UInt8]? {
            if extended { return protocolNumber == 0x94 ? GT06Codec.acknowledgement(protocolNumber, serial: serial) : nil }
            if (0x80...0x82).contains(protocolNumber) { return nil }
            return GT06Codec.acknowledgement(protocolNumber, serial: serial)
        }
    }

    func decodeFrame(_ frame: Frame, now: Timestamp) -> Result<TrackerMessage, TrackerFrameError> {
        let content = frame.content
        switch frame.protocolNumber {
        case 0x01:
            guard content.count >= 8, let digits = WireText.bcdDigits(content[0..<8]) else {
                return .failure(TrackerFrameError("syntax", "login without an 8-byte BCD IMEI"))
            }
            // 16 BCD digits hold a 15-digit IMEI behind a 0.
            let imei = digits.hasPrefix("0") ? String(digits.dropFirst()) : digits
            return .success(.identification(deviceID: imei, accepted: Self.acknowledgement(0x01, serial: frame.serial), refused: nil))
        case 0x13, 0x23:
            return .success(.control(kind: "heartbeat", deviceID: nil, answer: frame.answer))
        case 0x8A:
            return .success(.control(kind: "time_request", deviceID: nil, answer: Self.timeAnswer(now: now, serial: frame.serial)))
        case 0x10, 0x11, 0x12, 0x16, 0x1A, 0x1E, 0x22, 0x26, 0x27, 0x2D, 0x31, 0x37, 0x38, 0xA0, 0xA3, 0xA4:
            return .success(positionMessage(frame, gpsOffset: 0))
        case 0x32:
            // GPS, LBS and status: the standard block in a 78 78 frame (SL4X), the AZ735 layout
            // (a GPS length byte, 0 without a fix) in a 79 79 one.
            return .success(frame.extended ? extendedGPSMessage(frame) : positionMessage(frame, gpsOffset: 0))
        case 0x34:
            // X1: four bytes of data and alarm flags before the GPS block.
            return .success(positionMessage(frame, gpsOffset: 4))
        case 0xA2:
            // GK310 sends cell towers under 0xA2, 4G devices a GPS block: a GPS block's 7th byte has
            // the information length 12 in its high nibble, where a cell list has a country code
            // (below 0x0400, or 0x8000 | code).
            if content.count > 6, content[6] >> 4 == 0x0C {
                return .success(positionMessage(frame, gpsOffset: 0))
            }
            return .success(.control(kind: "lbs", deviceID: nil, answer: frame.answer))
        case 0x70:
            return .success(modularMessage(frame))
        case 0x15, 0x21:
            return .success(.commandReply(kind: "string", deviceID: nil, reply: Self.commandReply(frame), answer: frame.answer))
        default:
            return .success(.control(kind: Self.kind(of: frame.protocolNumber), deviceID: nil, answer: frame.answer))
        }
    }

    /// The metric word for a frame type without a position.
    static func kind(of protocolNumber: UInt8) -> String {
        switch protocolNumber {
        case 0x15, 0x21: "string"
        case 0x94: "info"
        case 0x9B: "serial"
        case 0x17, 0x2C, 0x33, 0x69, 0xF3: "wifi"
        case 0x18, 0x19, 0x24, 0x28, 0x2E, 0xA1, 0xA5, 0xA7: "lbs"
        case 0x95: "alarm"
        case 0x2A: "address_request"
        case 0x65, 0x66, 0x8C: "obd"
        case 0x80, 0x81, 0x82: "command_response"
        case 0x35, 0x41: "media"
        case 0x36: "status"
        case 0x40: "bms"
        case 0x61: "rfid"
        case 0xF2: "peripheral"
        default: "unknown"
        }
    }

    /// A command's reply: 0x15 `[length][server flag: 4][text]`, 0x21 `[server flag: 4][encoding: 1 ASCII, 2 UTF-16][text]`.
    static func commandReply(_ frame: Frame) -> TrackerCommandReply {
        let c = frame.content
        if frame.protocolNumber == 0x15 {
            guard c.count >= 5 else { return TrackerCommandReply() }
            // Some devices send 0 for the length: the text then runs up to the language word.
            let declared = Int(c[0])
            let end = declared >= 4 && 1 + declared <= c.count ? 1 + declared : max(5, c.count - 2)
            return TrackerCommandReply(reference: Array(c[1..<5]), text: text(c[5..<end], utf16: false))
        }
        guard c.count >= 5 else { return TrackerCommandReply() }
        return TrackerCommandReply(reference: Array(c[0..<4]), text: text(c[5...], utf16: c[4] == 2))
    }

    /// Text without its NUL padding: ASCII, or UTF-16 big-endian.
    static func text(_ bytes: Slice<UnsafeRawBufferPointer>, utf16: Bool) -> String {
        var raw = Array(bytes)
        if utf16 {
            var units: [UInt16] = []
            var k = 0
            while k + 1 < raw.count {
                units.append(UInt16(raw[k]) << 8 | UInt16(raw[k + 1]))
                k += 2
            }
            while units.last == 0 { units.removeLast() }
            return String(decoding: units, as: UTF16.self)
        }
        while raw.last == 0 { raw.removeLast() }
        return String(decoding: raw, as: UTF8.self)
    }

    // MARK: - Positions

    private func positionMessage(_ frame: Frame, gpsOffset: Int) -> TrackerMessage {
        guard var position = readGPSBlock(frame.content, at: gpsOffset) else {
            return .control(kind: "undecoded", deviceID: nil, answer: frame.answer)
        }
        let content = frame.content
        let afterGPS = gpsOffset + 18
        switch frame.protocolNumber {
        case 0x16, 0x26, 0x27:
            readStatusBlock(content, afterGPS: afterGPS, into: &position)
        case 0x22:
            // GPS, cell (MCC 2, MNC 1, LAC 2, cell id 3), then ACC, upload mode, re-upload
            // [, mileage 4]: only these exact sizes are read as that layout.
            if content.count == afterGPS + 8 + 3 || content.count == afterGPS + 8 + 7 {
                setIgnitionIfUnknown(content[afterGPS + 8] != 0, &position)
            }
        case 0xA0:
            // GPS, cell (MCC 2, MNC 1 or 2 when MCC's top bit is set, LAC 4, cell id 8), then ACC,
            // upload mode, re-upload [, mileage 4].
            if content.count >= afterGPS + 2 {
                let mncWidth = content[afterGPS] & 0x80 != 0 ? 2 : 1
                let accIndex = afterGPS + 2 + mncWidth + 4 + 8
                if content.count == accIndex + 3 || content.count == accIndex + 7 {
                    setIgnitionIfUnknown(content[accIndex] != 0, &position)
                }
            }
        default:
            break
        }
        return .records(TrackerRecords(positions: [position], answer: frame.answer))
    }

    /// The 18-byte GPS block at `offset`, or nil when it is not there or not a fix on Earth.
    func readGPSBlock(_ content: UnsafeRawBufferPointer, at offset: Int) -> Position? {
        var reader = ByteReader(content, from: offset)
        guard reader.offset == offset, reader.remaining >= 18,
            let year = reader.u8(), let month = reader.u8(), let day = reader.u8(),
            let hour = reader.u8(), let minute = reader.u8(), let second = reader.u8(),
            let info = reader.u8(), let latitudeRaw = reader.u32(), let longitudeRaw = reader.u32(),
            let speed = reader.u8(), let flags = reader.u16()
        else { return nil }
        let civil = CivilTime(year: 2000 + Int(year), month: Int(month), day: Int(day),
                              hour: Int(hour), minute: Int(minute), second: Int(second))
        guard var time = civil.timestamp else { return nil }
        time.milliseconds -= Int64(timeZoneOffsetSeconds) * 1000
        return Self.position(time: time, satellites: Int(info & 0x0F), latitudeRaw: latitudeRaw,
                             longitudeRaw: longitudeRaw, speedKmh: Int(speed), flags: flags)
    }

    /// A position from GT06's coordinate encoding, or nil when it is not on Earth.
    static func position(time: Timestamp, satellites: Int, latitudeRaw: UInt32, longitudeRaw: UInt32,
                         speedKmh: Int, flags: UInt16) -> Position? {
        var latitude = Double(latitudeRaw) / 1_800_000
        var longitude = Double(longitudeRaw) / 1_800_000
        let course = Int(flags & 0x03FF)
        guard latitude <= 90, longitude <= 180, course <= 360 else { return nil }
        if flags & 0x0400 == 0 { latitude = -latitude }
        if flags & 0x0800 != 0 { longitude = -longitude }
        let valid = flags & 0x1000 != 0
        var position = Position(
            time: time, latitude: latitude, longitude: longitude, speed: Double(speedKmh) / 3.6,
            course: Double(course), mode: valid ? .twoD : .noFix, satellites: satellites)
        if flags & 0x4000 != 0 {
            position.attributes["ignition"] = flags & 0x8000 != 0 ? "true" : "false"
        }
        return position
    }

    private func setIgnitionIfUnknown(_ on: Bool, _ position: inout Position) {
        if position.attributes["ignition"] == nil { position.attributes["ignition"] = on ? "true" : "false" }
    }

    /// Cell and status block of 0x16 / 0x26 / 0x27: cell length, cell, terminal information,
    /// voltage level, GSM signal, alarm, language.
    ///
    /// The cell length byte counts itself on some devices and not on others (cell ids of 3 or 4
    /// bytes); the status block is where five bytes still fit. A 31-byte content (VXT01) has no
    /// cell length byte and carries power (2 bytes) where the voltage level would be.
    private func readStatusBlock(_ content: UnsafeRawBufferPointer, afterGPS: Int, into position: inout Position) {
        guard content.count > afterGPS else { return }
        if content.count == afterGPS + 8 + 5 {
            let status = afterGPS + 8
            applyTerminalInformation(content[status], alarmByte: nil, into: &position)
            position.attributes["gsm_signal"] = String(content[status + 3])
            return
        }
        let cellLength = Int(content[afterGPS])
        let start: Int
        if content.count - (afterGPS + 1 + cellLength) >= 5 {
            start = afterGPS + 1 + cellLength
        } else if cellLength >= 1, content.count - (afterGPS + cellLength) >= 5 {
            start = afterGPS + cellLength
        } else {
            return
        }
        applyTerminalInformation(content[start], alarmByte: content[start + 3], into: &position)
        let level = Int(content[start + 1])
        if level <= 6 {
            position.attributes["battery_level"] = String(level * 100 / 6)
        } else if level <= 100 {
            position.attributes["battery_level"] = String(level)
        }
        position.attributes["gsm_signal"] = String(content[start + 2])
    }

    /// Terminal information bits: 1 ACC, 2 charging, 3–5 alarm; the alarm byte, when not 0, wins.
    private func applyTerminalInformation(_ info: UInt8, alarmByte: UInt8?, into position: inout Position) {
        setIgnitionIfUnknown(info & 0x02 != 0, &position)
        position.attributes["charging"] = info & 0x04 != 0 ? "true" : "false"
        if let alarmByte, alarmByte != 0 {
            position.attributes["alarm"] = Self.alarmName(alarmByte)
        } else if let name = Self.terminalAlarmName((info >> 3) & 0x07) {
            position.attributes["alarm"] = name
        }
    }

    /// The alarm byte of status frames. Codes whose meaning depends on the device model (0x09,
    /// 0x18, 0x19, 0x28, 0x29, 0x30 differ between VL103, LW4G, SEEWORLD...) stay `alarm_<hex>`.
    static func alarmName(_ code: UInt8) -> String {
        switch code {
        case 0x01: "sos"
        case 0x02: "power_cut"
        case 0x03: "vibration"
        case 0x04: "geofence_enter"
        case 0x05: "geofence_exit"
        case 0x06: "overspeed"
        case 0x0E, 0x0F: "low_battery"
        case 0x11: "power_off"
        case 0x0C, 0x13, 0x25: "tampering"
        case 0x14: "door"
        case 0x1A, 0x27: "braking"
        case 0x1B, 0x2A, 0x2B, 0x2E: "cornering"
        case 0x23: "fall_down"
        case 0x26: "acceleration"
        case 0x2C: "accident"
        default: "alarm_" + WireText.hex([code])
        }
    }

    /// Bits 3–5 of the terminal information byte.
    static func terminalAlarmName(_ bits: UInt8) -> String? {
        switch bits {
        case 1: "vibration"
        case 2: "power_cut"
        case 3: "low_battery"
        case 4: "sos"
        case 6: "geofence"
        case 7: "removing"
        default: nil
        }
    }

    /// 79 79 0x32 (AZ735): `YY MM DD hh mm ss`, a GPS length byte (0: no fix, the frame holds only
    /// cells and Wi-Fi), satellites, latitude, longitude, speed, course and status as in the GPS block.
    private func extendedGPSMessage(_ frame: Frame) -> TrackerMessage {
        var reader = ByteReader(frame.content)
        guard let date = reader.take(6), let length = reader.u8(), length > 0 else {
            return .control(kind: "lbs", deviceID: nil, answer: frame.answer)
        }
        let d = Array(date)
        guard let satellites = reader.u8(), let latitudeRaw = reader.u32(), let longitudeRaw = reader.u32(),
              let speed = reader.u8(), let flags = reader.u16(),
              var time = CivilTime(year: 2000 + Int(d[0]), month: Int(d[1]), day: Int(d[2]), hour: Int(d[3]),
                                   minute: Int(d[4]), second: Int(d[5])).timestamp
        else { return .control(kind: "undecoded", deviceID: nil, answer: frame.answer) }
        time.milliseconds -= Int64(timeZoneOffsetSeconds) * 1000
        guard let position = Self.position(time: time, satellites: Int(satellites & 0x0F), latitudeRaw: latitudeRaw,
                                           longitudeRaw: longitudeRaw, speedKmh: Int(speed), flags: flags)
        else { return .control(kind: "undecoded", deviceID: nil, answer: frame.answer) }
        return .records(TrackerRecords(positions: [position], answer: frame.answer))
    }

    /// 0x70: modules of `[type: 2][length: 2][data]`; module 0x33 is the fix (UTC seconds since
    /// 1970, satellites, altitude int16 m, latitude, longitude, speed, course and status as in the GPS block).
    private func modularMessage(_ frame: Frame) -> TrackerMessage {
        var reader = ByteReader(frame.content)
        while reader.remaining >= 4 {
            guard let type = reader.u16(), let length = reader.u16(), let data = reader.take(Int(length)) else { break }
            guard type == 0x33 else { continue }
            var module = ByteReader(UnsafeRawBufferPointer(rebasing: data))
            guard let seconds = module.u32(), let satellites = module.u8(), let altitude = module.i16(),
                let latitudeRaw = module.u32(), let longitudeRaw = module.u32(), let speed = module.u8(),
                let flags = module.u16(),
                var position = Self.position(
                    time: Timestamp(milliseconds: Int64(seconds) * 1000), satellites: Int(satellites),
                    latitudeRaw: latitudeRaw, longitudeRaw: longitudeRaw, speedKmh: Int(speed), flags: flags)
            else { break }
            position.altitude = Double(altitude)
            return .records(TrackerRecords(positions: [position], answer: frame.answer))
        }
        return .control(kind: "undecoded", deviceID: nil, answer: frame.answer)
    }

    // MARK: - Answers

    /// `78 78 05 <protocol> <serial> <CRC> 0D 0A`.
    static func acknowledgement(_ protocolNumber: UInt8, serial: UInt16) -> [UInt8] {
        frame(protocolNumber, content: [], serial: serial)
    }

    /// The time reply: `78 78 0B 8A YY MM DD hh mm ss <serial> <CRC> 0D 0A`, UTC.
    static func timeAnswer(now: Timestamp, serial: UInt16) -> [UInt8] {
        let c = now.components
        let fields = [c.year - 2000, c.month, c.day, c.hour, c.minute, c.second]
        return frame(0x8A, content: fields.map { UInt8(clamping: $0) }, serial: serial)
    }

    /// A `78 78` frame around `content`.
    static func frame(_ protocolNumber: UInt8, content: [UInt8], serial: UInt16) -> [UInt8] {
        var body: [UInt8] = [UInt8(5 + content.count), protocolNumber]
        body += content
        body += [UInt8(serial >> 8), UInt8(serial & 0xFF)]
        let crc = CRC16.x25(body)
        return [0x78, 0x78] + body + [UInt8(crc >> 8), UInt8(crc & 0xFF), 0x0D, 0x0A]
    }
}
