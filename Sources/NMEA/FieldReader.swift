/// Reads the comma-separated fields of one sentence body and parses them from bytes.
///
/// Empty and missing trailing fields are absent values (nil). A non-empty field that does
/// not parse sets ``failed``, and the caller rejects the sentence as `badField`.
struct FieldReader {
    private let bytes: UnsafeRawBufferPointer
    private var position: Int
    private var exhausted = false
    /// True once a non-empty field failed to parse.
    var failed = false

    /// A reader over `body` (the bytes between `$` and `*`), positioned after the address field.
    init(body: UnsafeRawBufferPointer) {
        self.bytes = body
        self.position = 0
        _ = next()
    }

    /// The byte range of the next field; empty once the sentence has no more fields.
    @inline(__always)
    mutating func next() -> Range<Int> {
        guard !exhausted else { return position..<position }
        let start = position
        let end = bytes.count
        var i = start
        while i < end && bytes[i] != 0x2C { i += 1 }
        if i >= end {
            exhausted = true
            position = end
        } else {
            position = i + 1
        }
        return start..<i
    }

    /// Skips `n` fields.
    mutating func skip(_ n: Int) {
        for _ in 0..<n { _ = next() }
    }

    // MARK: - Typed fields

    /// A decimal number such as `-12.345`, or nil when empty.
    mutating func decimal() -> Double? {
        parseDecimal(next())
    }

    /// A non-negative integer, or nil when empty.
    mutating func integer() -> Int? {
        let r = next()
        if r.isEmpty { return nil }
        var v = 0
        for i in r {
            let d = bytes[i] &- 0x30
            guard d < 10, v < 100_000_000 else { failed = true; return nil }
            v = v * 10 + Int(d)
        }
        return v
    }

    /// The first byte of the field, or nil when empty (mode indicators, statuses, units).
    mutating func character() -> UInt8? {
        let r = next()
        return r.isEmpty ? nil : bytes[r.lowerBound]
    }

    /// A single-byte field that must be one of `allowed`, or nil when empty.
    mutating func flag(_ allowed: StaticString) -> UInt8? {
        let r = next()
        if r.isEmpty { return nil }
        let c = bytes[r.lowerBound]
        guard r.count == 1, Self.contains(allowed, c) else { failed = true; return nil }
        return c
    }

    /// Time of day `hhmmss[.sss]` in milliseconds since midnight, or nil when empty.
    mutating func timeOfDay() -> Int? {
        let r = next()
        if r.isEmpty { return nil }
        guard r.count >= 6 else { failed = true; return nil }
        let b = r.lowerBound
        guard let hh = twoDigits(b), let mm = twoDigits(b + 2), let ss = twoDigits(b + 4),
              hh < 24, mm < 60, ss <= 60
        else { failed = true; return nil }
        var ms = 0
        if r.count > 6 {
            guard bytes[b + 6] == 0x2E else { failed = true; return nil }
            var scale = 100
            var i = b + 7
            // A bare trailing dot (`123519.`) is tolerated; digits past milliseconds are dropped.
            while i < r.upperBound {
                let d = bytes[i] &- 0x30
                guard d < 10 else { failed = true; return nil }
                ms += Int(d) * scale
                scale /= 10
                i += 1
            }
        }
        return ((hh * 60 + mm) * 60 + ss) * 1000 + ms
    }

    /// Date `ddmmyy` as (day, month, two-digit year), or nil when empty.
    mutating func dateDDMMYY() -> (day: Int, month: Int, year: Int)? {
        let r = next()
        if r.isEmpty { return nil }
        let b = r.lowerBound
        guard r.count == 6, let d = twoDigits(b), let m = twoDigits(b + 2), let y = twoDigits(b + 4),
              (1...31).contains(d), (1...12).contains(m)
        else { failed = true; return nil }
        return (d, m, y)
    }

    /// A coordinate `dddmm.mmmm` plus its hemisphere field, in signed degrees; nil when empty.
    ///
    /// - Parameters:
    ///   - positive: the hemisphere letter for positive values (`N` or `E`).
    ///   - negative: the hemisphere letter for negative values (`S` or `W`).
    ///   - limit: the largest absolute value in degrees (90 or 180).
    mutating func coordinate(positive: UInt8, negative: UInt8, limit: Double) -> Double? {
        let valueRange = next()
        let hemisphereRange = next()
        if valueRange.isEmpty && hemisphereRange.isEmpty { return nil }
        // ddmm.mmmm with more than 10 decimals of minutes is no receiver's (and 100·10^scale must fit an Int).
        guard let (mantissa, scale) = parseMantissa(valueRange), mantissa >= 0, scale <= 10, hemisphereRange.count == 1
        else { failed = true; return nil }
        let h = bytes[hemisphereRange.lowerBound]
        guard h == positive || h == negative else { failed = true; return nil }
        // Split whole degrees off in integers so the minutes keep every digit.
        // Receivers send 2 to 6 decimals of minutes: constant divisors become multiplications.
        let degrees: Int
        switch scale {
        case 2: degrees = mantissa / 10_000
        case 3: degrees = mantissa / 100_000
        case 4: degrees = mantissa / 1_000_000
        case 5: degrees = mantissa / 10_000_000
        case 6: degrees = mantissa / 100_000_000
        default: degrees = mantissa / (100 * Self.powersOf10Int[scale])
        }
        let minuteMantissa = mantissa - degrees * 100 * Self.pow10Int(scale)
        let minutes = Double(minuteMantissa) / Self.pow10(scale)
        guard minutes < 60 else { failed = true; return nil }
        let value = Double(degrees) + minutes / 60
        guard value <= limit else { failed = true; return nil }
        return h == negative ? -value : value
    }

    // MARK: - Number parsing

    /// A decimal number from the field's bytes; sets ``failed`` when it is not one.
    mutating func parseDecimal(_ r: Range<Int>) -> Double? {
        if r.isEmpty { return nil }
        guard let (m, s) = parseMantissa(r) else { failed = true; return nil }
        // Exact for up to 15 significant digits: both operands are exact doubles, one rounding.
        return Double(m) / Self.pow10(s)
    }

    /// Parses `[+-]digits[.digits]` into an integer mantissa and a count of fraction digits.
    ///
    /// Fraction digits beyond 15 significant digits are dropped: no receiver is that precise.
    @inline(__always)
    private func parseMantissa(_ r: Range<Int>) -> (Int, Int)? {
        // Fast path for what receivers send: at most 15 digits, so none is dropped and the
        // result is the same as the general loop's.
        var i = r.lowerBound
        let end = r.upperBound
        var negative = false
        if i < end && (bytes[i] == 0x2D || bytes[i] == 0x2B) {
            negative = bytes[i] == 0x2D
            i += 1
        }
        var mantissa = 0
        let intStart = i
        while i < end {
            let d = bytes[i] &- 0x30
            if d >= 10 { break }
            mantissa = mantissa &* 10 &+ Int(d)
            i += 1
        }
        let intDigits = i - intStart
        var scale = 0
        if i < end && bytes[i] == 0x2E {
            i += 1
            let fracStart = i
            while i < end {
                let d = bytes[i] &- 0x30
                if d >= 10 { break }
                mantissa = mantissa &* 10 &+ Int(d)
                i += 1
            }
            scale = i - fracStart
        }
        guard intDigits + scale > 15 else {
            guard i == end, intDigits + scale > 0 else { return nil }
            return (negative ? -mantissa : mantissa, scale)
        }
        return parseLongMantissa(r)
    }

    /// ``parseMantissa(_:)`` for fields of more than 15 digits.
    private func parseLongMantissa(_ r: Range<Int>) -> (Int, Int)? {
        var i = r.lowerBound
        var negative = false
        if i < r.upperBound && (bytes[i] == 0x2D || bytes[i] == 0x2B) {
            negative = bytes[i] == 0x2D
            i += 1
        }
        var mantissa = 0
        var scale = 0
        var digits = 0
        var significant = 0
        var seenDot = false
        while i < r.upperBound {
            let c = bytes[i]
            if c == 0x2E {
                guard !seenDot else { return nil }
                seenDot = true
            } else {
                let d = c &- 0x30
                guard d < 10 else { return nil }
                digits += 1
                if significant < 15 {
                    if mantissa != 0 || d != 0 { significant += 1 }
                    mantissa = mantissa * 10 + Int(d)
                    if seenDot { scale += 1 }
                } else if !seenDot {
                    return nil  // an integer part this long is not a receiver value
                }
            }
            i += 1
        }
        // Leading fraction zeros are not significant but still scale: beyond 15 the value is no
        // receiver's, and the power-of-ten tables (and Int) end soon after.
        guard digits > 0, scale <= 15 else { return nil }
        return (negative ? -mantissa : mantissa, scale)
    }

    @inline(__always)
    private func twoDigits(_ i: Int) -> Int? {
        let a = bytes[i] &- 0x30
        let b = bytes[i + 1] &- 0x30
        guard a < 10, b < 10 else { return nil }
        return Int(a) * 10 + Int(b)
    }

    @inline(__always)
    private static func contains(_ set: StaticString, _ c: UInt8) -> Bool {
        set.withUTF8Buffer { $0.contains(c) }
    }

    /// `powersOf10[s]`, from constants for the usual scales (no lazy-global access per field).
    @inline(__always)
    static func pow10(_ s: Int) -> Double {
        switch s {
        case 0: 1
        case 1: 1e1
        case 2: 1e2
        case 3: 1e3
        case 4: 1e4
        case 5: 1e5
        case 6: 1e6
        case 7: 1e7
        case 8: 1e8
        case 9: 1e9
        default: powersOf10[s]
        }
    }

    /// `powersOf10Int[s]`, from constants for the usual scales.
    @inline(__always)
    static func pow10Int(_ s: Int) -> Int {
        switch s {
        case 0: 1
        case 1: 10
        case 2: 100
        case 3: 1_000
        case 4: 10_000
        case 5: 100_000
        case 6: 1_000_000
        case 7: 10_000_000
        case 8: 100_000_000
        case 9: 1_000_000_000
        default: powersOf10Int[s]
        }
    }

    static let powersOf10: [Double] = (0...22).map { p in
        var v = 1.0
        for _ in 0..<p { v *= 10 }
        return v
    }

    static let powersOf10Int: [Int] = (0...18).map { p in
        var v = 1
        for _ in 0..<p { v *= 10 }
        return v
    }
}
