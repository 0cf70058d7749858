import GatewayCore

/// Suntech's two binary report forms, big-endian.
///
/// Zip (ST300, `02 … 03`): length WORD | type BYTE (0x10) | id (5 bytes, the first 9 hex digits)
/// | model BYTE | version WORD | date `yy MM dd`, time `HH mm ss` (UTC) | LAC WORD | cell BYTE |
/// latitude: degrees BYTE + 6 BCD digits of a degree | longitude the same | km/h WORD + 2 BCD
/// digits of hundredths | course the same | flags BYTE (bit 7 fix, 6 south, 5 west) | odometer
/// DWORD | power BYTE + 2 BCD digits | io BYTE | event BYTE | … | 03.
///
/// Universal binary (0x81 STT, 0x82 ALT): length WORD | id (5 bytes, 10 hex digits) | map
/// (3 bytes), then the fields the map names, as in the text form: bit 1 model BYTE, 2 version
/// (3 bytes), 3 message type BYTE (0: stored, marked `late`), 4–5 date and time (6 bytes),
/// 6 cell DWORD, 7–9 MCC, MNC, LAC WORD each, 10 rssi BYTE, 11–12 latitude and longitude
/// (sign and magnitude DWORDs, 1e-6°), 13 km/h WORD (0.01), 14 course WORD (0.01), 15
/// satellites BYTE, 16 fix BYTE.
enum SuntechBinary {
    /// The device and position of a zip report (the whole frame, `02` … `03`).
    static func zip(_ frame: UnsafeRawBufferPointer) -> (String, Position)? {
        var reader = ByteReader(frame, from: 3)
        guard reader.u8() == 0x10, let idBytes = reader.take(5), reader.skip(3),
              let date = reader.take(3), let clock = reader.take(3), reader.skip(3),
              let latitude = bcdAngle(&reader), let longitude = bcdAngle(&reader),
              let speed = hundredths(&reader), let course = hundredths(&reader), let flags = reader.u8(),
              let odometer = reader.u32()
        else { return nil }
        let id = String(WireText.hex(idBytes).prefix(9))
        let time = instant(date: date, clock: clock)
        guard var position = TextFix.position(
            time: time, latitude: flags & 0x40 != 0 ? -latitude : latitude, longitude: flags & 0x20 != 0 ? -longitude : longitude,
            valid: flags & 0x80 != 0, speedKmh: speed, course: course)
        else { return nil }
        position.attributes["odometer"] = String(odometer)
        return (id, position)
    }

    /// `yy MM dd` and `HH mm ss` as bytes, UTC.
    static func instant(date: Slice<UnsafeRawBufferPointer>, clock: Slice<UnsafeRawBufferPointer>) -> Timestamp? {
        let d = Array(date), c = Array(clock)
        return CivilTime(year: 2000 + Int(d[0]), month: Int(d[1]), day: Int(d[2]), hour: Int(c[0]), minute: Int(c[1]), second: Int(c[2])).timestamp
    }

    /// Degrees as a BYTE and six BCD digits of a degree.
    static func bcdAngle(_ reader: inout ByteReader) -> Double? {
        guard let whole = reader.u8(), let fraction = reader.take(3), let digits = WireText.bcdDigits(fraction), let value = Int(digits) else { return nil }
        return Double(whole) + Double(value) / 1_000_000
    }

    /// A WORD and two BCD digits of hundredths.
    static func hundredths(_ reader: inout ByteReader) -> Double? {
        guard let whole = reader.u16(), let fraction = reader.take(1), let digits = WireText.bcdDigits(fraction), let value = Int(digits) else { return nil }
        return Double(whole) + Double(value) / 100
    }

    /// The device and position of a universal binary report.
    static func universal(_ frame: UnsafeRawBufferPointer) -> (String, Position)? {
        var reader = ByteReader(frame, from: 3)
        guard frame[0] == 0x81 || frame[0] == 0x82, let idBytes = reader.take(5), let map = reader.unsigned(width: 3) else { return nil }
        func has(_ bit: Int) -> Bool { map & (1 << UInt64(bit)) != 0 }
        var stored = false
        var time: Timestamp?
        var latitude: Double?, longitude: Double?, speed: Double?, course: Double?, satellites: Int?
        var valid = true
        // Fields in bit order, each a fixed width.
        let widths = [1: 1, 2: 3, 3: 1, 6: 4, 7: 2, 8: 2, 9: 2, 10: 1, 11: 4, 12: 4, 13: 2, 14: 2, 15: 1, 16: 1]
        for bit in 1...16 {
            if bit == 4 || bit == 5 {
                guard bit == 4, has(4), has(5) else { continue }
                guard let date = reader.take(3), let clock = reader.take(3) else { return nil }
                time = instant(date: date, clock: clock)
                continue
            }
            guard has(bit), let width = widths[bit] else { continue }
            guard let value = reader.unsigned(width: width) else { return nil }
            switch bit {
            case 3: stored = value == 0
            case 11, 12:
                let magnitude = Double(value & 0x7FFF_FFFF) / 1_000_000
                let signed = value & 0x8000_0000 != 0 ? -magnitude : magnitude
                if bit == 11 { latitude = signed } else { longitude = signed }
            case 13: speed = Double(value) / 100
            case 14: course = Double(value) / 100
            case 15: satellites = Int(value)
            case 16: valid = value > 0
            default: break
            }
        }
        guard latitude != nil, longitude != nil, var position = TextFix.position(
            time: time, latitude: latitude, longitude: longitude, valid: valid, speedKmh: speed, course: course, satellites: satellites)
        else { return nil }
        if frame[0] == 0x82 { position.attributes["report"] = "ALT" }
        if stored { LateFixes.mark(&position) }
        return (WireText.hex(idBytes), position)
    }
}
