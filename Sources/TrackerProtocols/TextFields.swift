import GatewayCore

/// The fields of one text frame, split at a separator, read in place: no `String` per field, no
/// `Double(String)`. The text protocols (GPS103, watch, @Track, Meitrack, Suntech) read their
/// sentences with it.
///
/// Every reader returns nil for a field that is missing or not what it is asked as, so a
/// sentence cut short or garbled is a nil read, never a trap.
struct TextFields {
    /// The frame's bytes (the fields index into them).
    let bytes: UnsafeRawBufferPointer
    /// Each field's range in ``bytes``, separators excluded.
    private(set) var ranges: [Range<Int>] = []

    /// Splits `bytes[start..<end]` at every `separator`; at most `limit` fields (the last one
    /// keeps the rest, separators and all).
    init(_ bytes: UnsafeRawBufferPointer, separator: UInt8, from start: Int = 0, to end: Int? = nil, limit: Int = 512) {
        self.bytes = bytes
        let stop = min(end ?? bytes.count, bytes.count)
        var fieldStart = min(max(0, start), stop)
        var index = fieldStart
        while index < stop {
            if bytes[index] == separator, ranges.count + 1 < limit {
                ranges.append(fieldStart..<index)
                fieldStart = index + 1
            }
            index += 1
        }
        ranges.append(fieldStart..<stop)
    }

    var count: Int { ranges.count }

    /// The field's bytes; empty when there is no such field.
    subscript(index: Int) -> Slice<UnsafeRawBufferPointer> {
        guard index >= 0, index < ranges.count else { return bytes[0..<0] }
        return bytes[ranges[index]]
    }

    func isEmpty(_ index: Int) -> Bool { self[index].isEmpty }

    /// Whether the field is exactly `literal` (ASCII).
    func `is`(_ index: Int, _ literal: StaticString) -> Bool { TextNumber.equals(self[index], literal) }

    /// The field as text when it is printable ASCII (spaces allowed), else nil.
    func text(_ index: Int) -> String? { TextNumber.printable(self[index]) }

    func decimal(_ index: Int) -> Double? { TextNumber.decimal(self[index]) }
    func integer(_ index: Int) -> Int? { TextNumber.integer(self[index]) }
    func hex(_ index: Int) -> UInt64? { TextNumber.hex(self[index]) }

    /// Fields `from..<count` joined with the separator, as text (what a command result says).
    func rest(from index: Int, separator: UInt8) -> String {
        guard index < ranges.count else { return "" }
        let slice = bytes[ranges[index].lowerBound..<ranges[ranges.count - 1].upperBound]
        return String(decoding: slice.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}

/// Numbers and words read from ASCII bytes.
enum TextNumber {
    /// `[+-]digits[.digits]`, spaces around allowed; at most 17 digits. Nil for anything else
    /// (an empty field, `1e5`, `0x10`, two dots).
    static func decimal<Bytes: Collection>(_ field: Bytes) -> Double? where Bytes.Element == UInt8 {
        var mantissa: Int64 = 0
        var digits = 0, decimals = 0
        var negative = false, seenDot = false, seenSign = false
        for byte in trimmed(field) {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                digits += 1
                guard digits <= 17 else { return nil }
                mantissa = mantissa * 10 + Int64(byte - 48)
                if seenDot { decimals += 1 }
            case UInt8(ascii: "."):
                guard !seenDot else { return nil }
                seenDot = true
            case UInt8(ascii: "-"), UInt8(ascii: "+"):
                guard !seenSign, digits == 0, !seenDot else { return nil }
                seenSign = true
                negative = byte == UInt8(ascii: "-")
            default:
                return nil
            }
        }
        guard digits > 0 else { return nil }
        // Both operands are exact (below 2^53), so the quotient is correctly rounded: the same
        // double `Double("12.345")` gives.
        let value = Double(mantissa) / powersOfTen[decimals]
        return negative ? -value : value
    }

    static let powersOfTen: [Double] = (0...17).map { k in (0..<k).reduce(1.0) { acc, _ in acc * 10 } }

    /// Whether the field holds a decimal point (a coordinate, where an integer is a cell id).
    static func hasDot<Bytes: Collection>(_ field: Bytes) -> Bool where Bytes.Element == UInt8 {
        field.contains(UInt8(ascii: "."))
    }

    /// Digits only (a leading `-` allowed), at most 18.
    static func integer<Bytes: Collection>(_ field: Bytes) -> Int? where Bytes.Element == UInt8 {
        var value = 0, digits = 0, negative = false
        for (k, byte) in trimmed(field).enumerated() {
            if k == 0, byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+") {
                negative = byte == UInt8(ascii: "-")
                continue
            }
            guard byte >= 48, byte <= 57, digits < 18 else { return nil }
            value = value * 10 + Int(byte - 48)
            digits += 1
        }
        guard digits > 0 else { return nil }
        return negative ? -value : value
    }

    /// Hex digits only (either case), at most 16.
    static func hex<Bytes: Collection>(_ field: Bytes) -> UInt64? where Bytes.Element == UInt8 {
        guard !field.isEmpty, field.count <= 16 else { return nil }
        var value: UInt64 = 0
        for byte in field {
            guard let nibble = nibble(byte) else { return nil }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }

    static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 48...57: byte - 48
        case 65...70: byte - 55
        case 97...102: byte - 87
        default: nil
        }
    }

    /// The value of `count` ASCII digits at `offset` of `field`.
    static func digits<Bytes: Collection>(_ field: Bytes, at offset: Int, count: Int) -> Int? where Bytes.Element == UInt8, Bytes.Index == Int {
        guard offset >= 0, count > 0, offset + count <= field.count else { return nil }
        var value = 0
        let base = field.startIndex + offset
        for index in base..<(base + count) {
            let byte = field[index]
            guard byte >= 48, byte <= 57 else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        return value
    }

    /// `DDMM.MMMM` (or `DDDMM.MMMMM`): degrees and minutes as an unsigned angle in degrees.
    static func degreesMinutes<Bytes: Collection>(_ field: Bytes) -> Double? where Bytes.Element == UInt8 {
        let text = Array(trimmed(field))
        guard let dot = text.firstIndex(of: UInt8(ascii: ".")) ?? (text.isEmpty ? nil : text.count),
              dot >= 3, text.allSatisfy({ ($0 >= 48 && $0 <= 57) || $0 == UInt8(ascii: ".") }),
              let degrees = integer(text[0..<(dot - 2)]), let minutes = decimal(text[(dot - 2)...]), minutes < 60
        else { return nil }
        return Double(degrees) + minutes / 60
    }

    /// The field without spaces around it.
    static func trimmed<Bytes: Collection>(_ field: Bytes) -> Bytes.SubSequence where Bytes.Element == UInt8 {
        var start = field.startIndex, end = field.endIndex
        while start < end, field[start] == 0x20 { start = field.index(after: start) }
        while end > start {
            let last = field.index(start, offsetBy: field.distance(from: start, to: end) - 1)
            guard field[last] == 0x20 else { break }
            end = last
        }
        return field[start..<end]
    }

    static func equals<Bytes: Collection>(_ field: Bytes, _ literal: StaticString) -> Bool where Bytes.Element == UInt8 {
        literal.withUTF8Buffer { field.elementsEqual($0) }
    }

    static func hasPrefix<Bytes: Collection>(_ field: Bytes, _ literal: StaticString) -> Bool where Bytes.Element == UInt8 {
        literal.withUTF8Buffer { prefix in field.count >= prefix.count && field.prefix(prefix.count).elementsEqual(prefix) }
    }

    /// Printable ASCII (and spaces) as a string, else nil; at most `limit` bytes.
    static func printable<Bytes: Collection>(_ field: Bytes, limit: Int = 64) -> String? where Bytes.Element == UInt8 {
        guard field.count <= limit, field.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: field, as: UTF8.self)
    }
}

/// Civil times written as digits: each protocol's layout is a pattern (`yyMMddHHmmss`,
/// `HH:mm:ss`) whose letters are digits and whose other characters must be there as written.
enum TextTime {
    /// Reads `field` into `time` by `pattern` (`y` year, `M` month, `d` day, `H` hour, `m`
    /// minute, `s` second; a two-digit year is 20yy). False when the field does not fit.
    static func read<Bytes: Collection>(_ field: Bytes, _ pattern: StaticString, into time: inout CivilTime) -> Bool
    where Bytes.Element == UInt8, Bytes.Index == Int {
        pattern.withUTF8Buffer { layout in
            guard field.count == layout.count else { return false }
            var index = 0
            while index < layout.count {
                let letter = layout[index]
                var width = 1
                while index + width < layout.count, layout[index + width] == letter { width += 1 }
                if "yMdHms".utf8.contains(letter) {
                    guard let value = TextNumber.digits(field, at: index, count: width) else { return false }
                    switch letter {
                    case UInt8(ascii: "y"): time.year = width == 2 ? 2000 + value : value
                    case UInt8(ascii: "M"): time.month = value
                    case UInt8(ascii: "d"): time.day = value
                    case UInt8(ascii: "H"): time.hour = value
                    case UInt8(ascii: "m"): time.minute = value
                    default: time.second = value
                    }
                } else {
                    for k in 0..<width where field[field.startIndex + index + k] != letter { return false }
                }
                index += width
            }
            return true
        }
    }

    /// One field holding a whole date and time, as an instant; nil when it is not one.
    static func instant<Bytes: Collection>(_ field: Bytes, _ pattern: StaticString) -> Timestamp? where Bytes.Element == UInt8, Bytes.Index == Int {
        var time = CivilTime(year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0)
        guard read(field, pattern, into: &time) else { return nil }
        return time.timestamp
    }

    /// A date field and a time field, as an instant; nil when either is not one.
    static func instant<Date: Collection, Time: Collection>(date: Date, _ datePattern: StaticString, time: Time, _ timePattern: StaticString) -> Timestamp?
    where Date.Element == UInt8, Date.Index == Int, Time.Element == UInt8, Time.Index == Int {
        var civil = CivilTime(year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0)
        guard read(date, datePattern, into: &civil), read(time, timePattern, into: &civil) else { return nil }
        return civil.timestamp
    }
}

/// Where positions' coordinates stand, shared by the text codecs: signed degrees checked to be
/// on Earth, and the house rule for a report without a fix (mode `.noFix`, coordinates kept
/// unless both are zero, so a `quality_filter` drops it and its alarm still reaches the sinks).
enum TextFix {
    /// A position from what a report says; nil when the coordinates are off the Earth.
    static func position(time: Timestamp?, latitude: Double?, longitude: Double?, valid: Bool, altitude: Double? = nil,
                         speedKmh: Double? = nil, course: Double? = nil, satellites: Int? = nil) -> Position? {
        var position = Position(time: time, altitude: altitude, speed: speedKmh.map { max(0, $0) / 3.6 },
                                course: course.flatMap { (0...360).contains($0) ? $0 : nil },
                                mode: valid ? (altitude == nil ? .twoD : .threeD) : .noFix,
                                satellites: satellites.flatMap { (0...Position.maximumSatellites).contains($0) ? $0 : nil })
        if let latitude, let longitude {
            guard latitude.isFinite, longitude.isFinite, abs(latitude) <= 90, abs(longitude) <= 180 else { return nil }
            if valid || latitude != 0 || longitude != 0 {
                position.latitude = latitude
                position.longitude = longitude
            }
        } else if valid {
            return nil
        }
        if let altitude, !altitude.isFinite || abs(altitude) > 100_000 { position.altitude = nil }
        return position
    }
}
