import GatewayCore

/// Reads the comma-separated fields of one sentence body and parses them from bytes.
///
/// Empty and missing trailing fields are absent values (nil). A non-empty field that does
/// not parse sets ``failed``, and the caller rejects the sentence as `badField`.
///
/// The typed readers parse a field from where it starts and find its end (a comma or the end
/// of the body) as they go, so each byte of a number is read once instead of once to find the
/// comma and again to parse. A field whose parse stops before its end is bad; the reader then
/// skips to the next comma, so the fields after it stay where they are.
///
/// One file of over 500 lines on purpose (issue 32 allows it): the typed readers, the memos and
/// the number parser are one cursor over one body (`bytes` and `position`, private to this
/// type), all inlined into the decoder's per-byte path; splitting them across files would make
/// the cursor visible to the whole module for no reader's benefit.
struct FieldReader {
    /// The text of one field, with the comma that ends it, and the value it parsed to: RMC and
    /// GGA (and GNS, GLL) of one epoch repeat the time and the coordinates byte for byte, and
    /// comparing up to 16 bytes costs a fraction of parsing them again. The text was checked
    /// when it was parsed, so the same text has the same value and no fault.
    struct Memo {
        fileprivate var key: (UInt64, UInt64) = (0, 0)
        fileprivate var mask: (UInt64, UInt64) = (0, 0)
        /// Bytes of text; 0 while nothing is remembered.
        fileprivate var length = 0
        fileprivate var bits: UInt64 = 0
    }

    /// The memos one decoder keeps from sentence to sentence.
    struct Memos {
        var time = Memo()
        var latitude = Memo()
        var longitude = Memo()
    }

    private let bytes: UnsafeRawBufferPointer
    /// Where the next field starts; `bytes.count + 1` once the body has no more fields (a body
    /// that ends with a comma has an empty last field at `bytes.count`).
    private var position: Int
    /// True once a non-empty field failed to parse.
    var failed = false

    /// A reader over `body` (the bytes between `$` and `*`), positioned after the address field.
    init(body: UnsafeRawBufferPointer) {
        self.bytes = body
        self.position = 0
        _ = next()
    }

    /// A reader over `body` whose address field is known to end at the comma at `comma`.
    init(body: UnsafeRawBufferPointer, addressEndingAt comma: Int) {
        self.bytes = body
        self.position = comma + 1
    }

    /// The byte range of the next field; empty once the sentence has no more fields.
    @inline(__always)
    mutating func next() -> Range<Int> {
        let start = position
        guard start <= bytes.count else { return bytes.count..<bytes.count }
        let stop = fieldEnd(from: start)
        moveOn(after: stop)
        return start..<stop
    }

    /// Skips `n` fields.
    mutating func skip(_ n: Int) {
        for _ in 0..<n { _ = next() }
    }

    /// The index of the comma that ends the field holding `i`, or the end of the body.
    @inline(__always)
    private func fieldEnd(from i: Int) -> Int {
        var i = i
        while i < bytes.count && bytes[i] != 0x2C { i += 1 }
        return i
    }

    /// Moves to the field after the one that ends at `stop` (its comma, or the end of the body).
    @inline(__always)
    private mutating func moveOn(after stop: Int) {
        position = stop < bytes.count ? stop + 1 : bytes.count + 1
    }

    /// True, stepping past it, when the next field is empty or there is none.
    @inline(__always)
    private mutating func takeEmpty() -> Bool {
        if position < bytes.count && bytes[position] != 0x2C { return false }
        moveOn(after: position)
        return true
    }

    /// A field's parse stopped at `i`: true when that is the field's end (the reader moves past
    /// it); false when bytes are left over (the reader skips them and the comma).
    @inline(__always)
    private mutating func close(at i: Int) -> Bool {
        let stop = fieldEnd(from: i)
        moveOn(after: stop)
        return stop == i
    }

    /// Marks the field holding `i` bad and skips the rest of it.
    @inline(__always)
    private mutating func reject<T>(from i: Int) -> T? {
        moveOn(after: fieldEnd(from: i))
        failed = true
        return nil
    }

    // MARK: - Memos

    /// The remembered value when the next bytes are the memo's text, moving past them.
    @inline(__always)
    private mutating func recall(_ memo: Memo) -> UInt64? {
        guard memo.length > 0, position + 16 <= bytes.count else { return nil }
        let (w0, w1) = words(at: position)
        guard w0 & memo.mask.0 == memo.key.0, w1 & memo.mask.1 == memo.key.1 else { return nil }
        position += memo.length
        return memo.bits
    }

    /// Remembers the text from `start` to here (what was just read, comma included) as `bits`,
    /// when it fits the memo's 16 bytes.
    ///
    /// A text that ends the body is never remembered (it has no comma to pin its end): there
    /// `position` is one past the end, so a length of at most 16 leaves less than 16 bytes from
    /// `start`.
    @inline(__always)
    private func remember(from start: Int, _ bits: UInt64, in memo: inout Memo) {
        let length = position - start
        guard length <= 16, start + 16 <= bytes.count else { return }
        let ones = UInt64.max
        memo.mask = (length >= 8 ? ones : ones >> (64 - 8 * length), length >= 16 ? ones : length > 8 ? ones >> (128 - 8 * length) : 0)
        let (w0, w1) = words(at: start)
        memo.key = (w0 & memo.mask.0, w1 & memo.mask.1)
        memo.length = length
        memo.bits = bits
    }

    /// The 16 bytes from `i` as two words, the first byte lowest.
    @inline(__always)
    private func words(at i: Int) -> (UInt64, UInt64) {
        (UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)),
         UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)))
    }

    /// ``timeOfDay()`` through a memo.
    @inline(__always)
    mutating func timeOfDay(_ memo: inout Memo) -> Int? {
        if let bits = recall(memo) { return Int(bitPattern: UInt(bits)) }
        let start = position
        let t = timeOfDay()
        if let t { remember(from: start, UInt64(UInt(bitPattern: t)), in: &memo) }
        return t
    }

    /// ``coordinate(positive:negative:limit:)`` through a memo.
    @inline(__always)
    mutating func coordinate(positive: UInt8, negative: UInt8, limit: Double, _ memo: inout Memo) -> Double? {
        if let bits = recall(memo) { return Double(bitPattern: bits) }
        let start = position
        let v = coordinate(positive: positive, negative: negative, limit: limit)
        if let v { remember(from: start, v.bitPattern, in: &memo) }
        return v
    }

    // MARK: - Typed fields

    /// A decimal number such as `-12.345`, or nil when empty.
    mutating func decimal() -> Double? {
        if takeEmpty() { return nil }
        guard let (m, s) = mantissa() else { failed = true; return nil }
        // Exact for up to 15 significant digits: both operands are exact doubles, one rounding.
        return Double(m) / Self.pow10(s)
    }

    /// A non-negative integer, or nil when empty.
    mutating func integer() -> Int? {
        if takeEmpty() { return nil }
        var v = 0
        var i = position
        while i < bytes.count {
            let d = bytes[i] &- 0x30
            if d >= 10 || v >= 100_000_000 { break }  // a tenth significant digit is no count or id
            v = v * 10 + Int(d)
            i += 1
        }
        guard close(at: i) else { failed = true; return nil }
        return v
    }

    /// Skips `n` (1 or more) fields that must each be empty or an ``integer()`` (a GSA's twelve
    /// satellite ids, a GSV's counts), as `n` calls of it would, in one pass over their bytes:
    /// digits and commas only, no run of ten digits. Anything else (a bad id, or ten digits that
    /// may still be a valid id when they start with zeros) is left to those `n` calls.
    ///
    /// Eight bytes at a time: each byte's comma and digit tests are exact (the high bit is
    /// masked off before the range sums), the `n`-th comma is found among a word's commas by
    /// clearing the lower ones, and only the run of digits that crosses into a word can reach
    /// ten (within a word a run between two commas has at most six).
    mutating func skipIntegers(_ n: Int) {
        let ones = WordBytes.ones, highs = WordBytes.highs, lows = ones &* 0x7F
        var i = position
        var remaining = n  // commas still to pass; the last one ends the last field
        var run = 0  // digits since the last comma
        while i &+ 8 <= bytes.count {
            let w = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let t = w ^ (ones &* 0x2C)
            let commas = ~(((t & lows) &+ lows) | t) & highs
            let digits = WordBytes.inRangeExact(w, 0x30, 0x3A)
            // The commas' count by one multiplication (the byte flags summed into the top byte):
            // the baseline x86-64 this is built for has no population count instruction.
            let count = Int(truncatingIfNeeded: ((commas >> 7) &* ones) >> 56)
            // Bytes of this word that belong to the skipped fields: all, or those before the
            // last comma to pass.
            var end = 8
            if count >= remaining {
                var c = commas
                for _ in 1..<remaining { c &= c &- 1 }
                end = c.trailingZeroBitCount >> 3
            }
            let span = end == 8 ? highs : highs & ((1 &<< UInt64(end &* 8)) &- 1)
            let within = commas & span
            let lead = within == 0 ? end : within.trailingZeroBitCount >> 3
            guard (commas | digits) & span == span, run &+ lead < 10 else { return integers(n) }
            if end < 8 {
                moveOn(after: i &+ end)
                return
            }
            run = within == 0 ? run &+ 8 : 7 &- ((63 &- within.leadingZeroBitCount) >> 3)
            remaining &-= count
            i &+= 8
        }
        // The last bytes of the body, one at a time.
        while i < bytes.count {
            let c = bytes[i]
            if c == 0x2C {
                remaining &-= 1
                if remaining == 0 { break }
                run = 0
            } else if c &- 0x30 < 10 {
                run &+= 1
                if run >= 10 { return integers(n) }
            } else {
                return integers(n)
            }
            i &+= 1
        }
        moveOn(after: i)
    }

    /// `n` calls of ``integer()``, their values dropped.
    @inline(never)
    private mutating func integers(_ n: Int) {
        for _ in 0..<n { _ = integer() }
    }

    /// The first byte of the field, or nil when empty (mode indicators, statuses, units).
    mutating func character() -> UInt8? {
        if takeEmpty() { return nil }
        let c = bytes[position]
        _ = next()
        return c
    }

    /// A single-byte field that must be one of `allowed` (capital letters), or nil when empty.
    ///
    /// Inlined, so that the set becomes a constant bit mask at each call site instead of a
    /// search through the string for every field.
    @inline(__always)
    mutating func flag(_ allowed: StaticString) -> UInt8? {
        if takeEmpty() { return nil }
        let c = bytes[position]
        let letter = c &- 0x41
        guard close(at: position + 1), letter < 26, Self.letters(allowed) & (1 &<< UInt32(letter)) != 0
        else { failed = true; return nil }
        return c
    }

    /// Time of day `hhmmss[.sss]` in milliseconds since midnight, or nil when empty.
    mutating func timeOfDay() -> Int? {
        if takeEmpty() { return nil }
        let b = position
        guard b + 6 <= bytes.count, let hh = twoDigits(b), let mm = twoDigits(b + 2), let ss = twoDigits(b + 4)
        else { return reject(from: b) }
        var i = b + 6
        var ms = 0
        if i < bytes.count && bytes[i] == 0x2E {
            var scale = 100
            i += 1
            // A bare trailing dot (`123519.`) is tolerated; digits past milliseconds are dropped.
            while i < bytes.count {
                let d = bytes[i] &- 0x30
                if d >= 10 { break }
                ms += Int(d) * scale
                scale /= 10
                i += 1
            }
        }
        guard close(at: i), hh < 24, mm < 60, ss <= 60 else { failed = true; return nil }
        return ((hh * 60 + mm) * 60 + ss) * 1000 + ms
    }

    /// Date `ddmmyy` as (day, month, two-digit year), or nil when empty.
    mutating func dateDDMMYY() -> (day: Int, month: Int, year: Int)? {
        if takeEmpty() { return nil }
        let b = position
        guard b + 6 <= bytes.count, let d = twoDigits(b), let m = twoDigits(b + 2), let y = twoDigits(b + 4)
        else { return reject(from: b) }
        guard close(at: b + 6), (1...31).contains(d), (1...12).contains(m) else { failed = true; return nil }
        return (d, m, y)
    }

    /// A coordinate `dddmm.mmmm` plus its hemisphere field, in signed degrees; nil when empty.
    ///
    /// - Parameters:
    ///   - positive: the hemisphere letter for positive values (`N` or `E`).
    ///   - negative: the hemisphere letter for negative values (`S` or `W`).
    ///   - limit: the largest absolute value in degrees (90 or 180).
    mutating func coordinate(positive: UInt8, negative: UInt8, limit: Double) -> Double? {
        let valueEmpty = takeEmpty()
        let parsed = valueEmpty ? nil : (wordMantissa() ?? mantissa())
        if takeEmpty() {
            if !valueEmpty { failed = true }
            return nil
        }
        let h = bytes[position]
        // ddmm.mmmm with more than 10 decimals of minutes is no receiver's (and 100·10^scale must fit an Int).
        guard close(at: position + 1), let (mantissa, scale) = parsed, mantissa >= 0, scale <= 10,
              h == positive || h == negative
        else { failed = true; return nil }
        // Split whole degrees off in integers so the minutes keep every digit.
        // Receivers send 2 to 6 decimals of minutes: constant divisors become multiplications.
        let degrees: Int
        switch scale {
        case 2: degrees = mantissa / 10_000
        case 3: degrees = mantissa / 100_000
        case 4: degrees = mantissa / 1_000_000
        case 5: degrees = mantissa / 10_000_000
        case 6: degrees = mantissa / 100_000_000
        default: degrees = mantissa / (100 * Self.pow10Int(scale))
        }
        let minuteMantissa = mantissa - degrees * 100 * Self.pow10Int(scale)
        let minutes = Double(minuteMantissa) / Self.pow10(scale)
        guard minutes < 60 else { failed = true; return nil }
        let value = Double(degrees) + minutes / 60
        guard value <= limit else { failed = true; return nil }
        return h == negative ? -value : value
    }

    // MARK: - Number parsing

    /// Parses `[+-]digits[.digits]` from the start of a non-empty field into an integer mantissa
    /// and a count of fraction digits, and moves past the field; nil when it is no such number.
    ///
    /// Fraction digits beyond 15 significant digits are dropped: no receiver is that precise.
    @inline(__always)
    private mutating func mantissa() -> (Int, Int)? {
        // Fast path for what receivers send: at most 15 digits, so none is dropped and the
        // result is the same as the general loop's.
        let start = position
        var i = start
        let end = bytes.count
        var negative = false
        if bytes[i] == 0x2D || bytes[i] == 0x2B {
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
            guard close(at: i), intDigits + scale > 0 else { return nil }
            return (negative ? -mantissa : mantissa, scale)
        }
        let stop = fieldEnd(from: i)
        _ = close(at: stop)
        return parseLongMantissa(start..<stop)
    }

    /// ``mantissa()`` for `digits.digits` of up to 14 digits whose comma is among the next
    /// sixteen bytes (coordinates: `ddmm.mmmm`, `dddmm.mmmmm`), read as two words; nil with the
    /// reader unmoved for anything else.
    ///
    /// A coordinate is the longest number of most sentences; byte by byte it costs several
    /// times this. Body bytes are printable ASCII (checked before parsing), so the per-byte sums
    /// never carry into the next byte. The dot taken out, the digits become one integer eight
    /// at a time (pairs, quadruples, then eight, in parallel lanes), the same mantissa and
    /// scale ``mantissa()`` finds.
    @inline(__always)
    private mutating func wordMantissa() -> (Int, Int)? {
        let p = position
        guard p + 16 <= bytes.count else { return nil }
        let (w0, w1) = words(at: p)
        let ones = WordBytes.ones
        @inline(__always) func nonDigits(_ w: UInt64) -> UInt64 { ~WordBytes.inRange(w, 0x30, 0x3A) & WordBytes.highs }
        @inline(__always) func below(_ n: Int) -> UInt128 { (1 &<< UInt128(8 &* n)) &- 1 }
        let text = UInt128(w1) &<< 64 | UInt128(w0)
        let other = UInt128(nonDigits(w1)) &<< 64 | UInt128(nonDigits(w0))
        let dot = other.trailingZeroBitCount >> 3
        guard dot > 0, dot < 15, (text &>> UInt128(8 &* dot)) & 0xFF == 0x2E else { return nil }
        let end = (other & ~below(dot &+ 1)).trailingZeroBitCount >> 3
        guard end < 16, (text &>> UInt128(8 &* end)) & 0xFF == 0x2C else { return nil }
        // Digit values 0...9, the first lowest, the fraction moved down over the dot.
        let zeros = UInt128(ones &* 0x30) &<< 64 | UInt128(ones &* 0x30)
        let joined: UInt128 = (text & below(dot)) | ((text &>> 8) & ~below(dot))
        let digits = joined &- zeros
        let count = end &- 1
        let m: UInt64
        if count <= 8 {
            m = Self.digitsValue(UInt64(truncatingIfNeeded: digits), count: count)
        } else {
            let head = count &- 8
            m = Self.digitsValue(UInt64(truncatingIfNeeded: digits), count: head) &* 100_000_000
                &+ Self.digitsValue(UInt64(truncatingIfNeeded: digits &>> UInt128(8 &* head)), count: 8)
        }
        moveOn(after: p &+ end)
        return (Int(truncatingIfNeeded: m), count &- dot)
    }

    /// The number written by the first `count` (1...8) digit values of `word`, the first digit
    /// in the lowest byte.
    @inline(__always)
    private static func digitsValue(_ word: UInt64, count: Int) -> UInt64 {
        // Right-aligned: the bytes shifted in at the bottom are leading zeros.
        var v = word &<< UInt64(64 &- 8 &* count)
        v = v &* 10 &+ (v &>> 8)
        return ((v & 0x0000_00FF_0000_00FF) &* (100 &+ (1_000_000 &<< 32))
            &+ ((v &>> 16) & 0x0000_00FF_0000_00FF) &* (1 &+ (10_000 &<< 32))) &>> 32
    }

    /// ``mantissa()`` for fields of more than 15 digits.
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

    /// The capital letters of `set` as bits 0 (`A`) to 25 (`Z`).
    @inline(__always)
    private static func letters(_ set: StaticString) -> UInt32 {
        var mask: UInt32 = 0
        for i in 0..<set.utf8CodeUnitCount {
            let letter = set.utf8Start[i] &- 0x41
            if letter < 26 { mask |= 1 &<< UInt32(letter) }
        }
        return mask
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

    /// 10^s for s in 0...18.
    @inline(__always)
    static func pow10Int(_ s: Int) -> Int { Int(truncatingIfNeeded: PowersOfTen.integer(s)) }

    static let powersOf10: [Double] = (0...22).map { p in
        var v = 1.0
        for _ in 0..<p { v *= 10 }
        return v
    }
}
