// Writing JSON text: `JSONWriter` for any value, `RawJSONWriter` for position records written
// into memory sized up front (the hot path of every JSON encoder of positions).

/// Appends JSON text to a byte buffer; used by every JSON encoder in the project.
public enum JSONWriter {
    /// Appends `s` as a quoted JSON string with the required escapes (``RawJSONWriter``'s).
    @inlinable
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: RawJSONWriter.maxStringLength(s)) { buf in
            guard let base = buf.baseAddress else { return }
            var w = RawJSONWriter(base)
            w.string(s)
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
        }
    }

    /// Appends a finite number in the shortest form that reads back exactly (`null` if not finite).
    public static func appendNumber(_ v: Double, to out: inout [UInt8]) {
        guard v.isFinite else { out.append(contentsOf: Array("null".utf8)); return }
        if v == v.rounded(), abs(v) < 1e15 {
            appendInt(Int64(v), to: &out)
            return
        }
        out.append(contentsOf: v.description.utf8)
    }

    /// Appends a number rounded to a fixed count of decimals, without trailing zeros.
    @inlinable
    public static func appendNumber(_ v: Double, decimals: Int, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: RawJSONWriter.maxNumberLength) { buf in
            guard let base = buf.baseAddress else { return }
            var w = RawJSONWriter(base)
            w.number(v, decimals: decimals)
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
        }
    }

    @inlinable
    public static func appendInt(_ v: Int64, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: RawJSONWriter.maxNumberLength) { buf in
            guard let base = buf.baseAddress else { return }
            var w = RawJSONWriter(base)
            w.int(v)
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
        }
    }

    /// Appends any JSON value.
    public static func append(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .bool(let b): out.append(contentsOf: Array((b ? "true" : "false").utf8))
        case .number(let n): appendNumber(n, to: &out)
        case .string(let s): appendString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                append(v, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, m) in o.members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                appendString(m.key, to: &out)
                out.append(UInt8(ascii: ":"))
                append(m.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }
}

extension JSONValue {
    /// Compact JSON text.
    public var jsonText: String {
        var out: [UInt8] = []
        JSONWriter.append(self, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// Writes JSON text into memory the caller has sized: whole records go out with one copy
/// instead of dozens of small appends (the file sink's hot path).
///
/// Visible to the package's modules (`package`) for the position encoders of PositionEncoding,
/// and `@inlinable` throughout: the encoders there call it once per byte and per number, and
/// only an inlinable body lets the release build inline and specialise those calls across the
/// module boundary as it did when the encoders lived here.
@usableFromInline package struct RawJSONWriter {
    /// Room one number can take: a 16-digit fixed-point value with sign and 20 decimals, or a
    /// shortest-form `Double` such as `-1.7976931348623157e+308`. A constant, not a stored
    /// `static let`: another module reads a global through its accessor, a call.
    @inlinable package static var maxNumberLength: Int { 48 }

    @usableFromInline package let base: UnsafeMutablePointer<UInt8>
    /// Bytes written so far.
    @usableFromInline package internal(set) var count = 0

    @inlinable package init(_ base: UnsafeMutablePointer<UInt8>) { self.base = base }

    /// Room `s` can take as a quoted, escaped JSON string.
    @inlinable package static func maxStringLength(_ s: String) -> Int { 2 + 6 * s.utf8.count }

    @inlinable @inline(__always)
    package mutating func byte(_ b: UInt8) {
        base[count] = b
        count &+= 1
    }

    @inlinable @inline(__always)
    package mutating func bytes(_ s: StaticString) {
        (base + count).update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        count &+= s.utf8CodeUnitCount
    }

    @inlinable @inline(__always)
    package mutating func bytes(_ b: UnsafeBufferPointer<UInt8>) {
        guard let start = b.baseAddress else { return }
        (base + count).update(from: start, count: b.count)
        count &+= b.count
    }

    /// Room `id` can take as a quoted, escaped JSON string.
    @inlinable package static func maxLength(of id: PositionID) -> Int {
        switch id.storage {
        case .text(let s): maxStringLength(s)
        case .numbered(let prefix, _, _): maxStringLength(prefix) + 1 + maxNumberLength
        }
    }

    /// `v` (0...99) as two digits, a leading zero included.
    @inlinable @inline(__always)
    package mutating func twoDigits(_ v: Int) {
        byte(UInt8(truncatingIfNeeded: 48 &+ v / 10))
        byte(UInt8(truncatingIfNeeded: 48 &+ v % 10))
    }

    /// `YYYY-MM-DDT` of `day`, days since 1970-01-01 (years clamped to 0...9999).
    @inlinable package mutating func date(_ day: Int) {
        let c = Timestamp.civilFromDays(day)
        let y = max(0, min(9999, c.year))
        twoDigits(y / 100); twoDigits(y % 100)
        byte(UInt8(ascii: "-")); twoDigits(c.month); byte(UInt8(ascii: "-")); twoDigits(c.day)
        byte(UInt8(ascii: "T"))
    }

    /// `s` as a quoted JSON string with the required escapes.
    @inlinable @inline(__always)
    package mutating func string(_ s: String) {
        byte(0x22)
        count = Self.writeContents(s, base, at: count)
        byte(0x22)
    }

    /// The text of `id` as a JSON string, written from its parts.
    @inlinable @inline(__always)
    package mutating func string(_ id: PositionID) {
        switch id.storage {
        case .text(let s): string(s)
        case .numbered(let prefix, let marker, let number):
            byte(0x22)
            count = Self.writeContents(prefix, base, at: count)
            if marker != 0 { byte(marker) }
            int(number)
            byte(0x22)
        }
    }

    /// Writes `s` escaped, without quotes, at `base + at`; returns the count after it.
    ///
    /// A function of its own taking the writer by value, like ``writeShortest(_:_:at:)``: a
    /// writer whose address is never passed to a call keeps its count in a register while the
    /// position is written; passed once, it is stored to memory after every byte.
    @inlinable static func writeContents(_ s: String, _ base: UnsafeMutablePointer<UInt8>, at: Int) -> Int {
        var w = RawJSONWriter(base)
        w.count = at
        var s = s
        s.withUTF8 { utf8 in
            // Ids, sources, devices and datums need no escapes: one copy.
            var clean = true
            for c in utf8 where c < 0x20 || c == 0x22 || c == 0x5C { clean = false; break }
            if clean { w.bytes(utf8); return }
            for c in utf8 {
                switch c {
                case 0x22: w.byte(0x5C); w.byte(0x22)
                case 0x5C: w.byte(0x5C); w.byte(0x5C)
                case 0x0A: w.byte(0x5C); w.byte(UInt8(ascii: "n"))
                case 0x0D: w.byte(0x5C); w.byte(UInt8(ascii: "r"))
                case 0x09: w.byte(0x5C); w.byte(UInt8(ascii: "t"))
                case 0..<0x20:
                    let hex: StaticString = "0123456789abcdef"
                    w.bytes("\\u00")
                    w.byte(hex.utf8Start[Int(c >> 4)])
                    w.byte(hex.utf8Start[Int(c & 15)])
                default: w.byte(c)
                }
            }
        }
        return w.count
    }

    /// Same text as ``JSONWriter/appendInt(_:to:)``.
    @inlinable @inline(__always)
    package mutating func int(_ v: Int64) {
        let m = v.magnitude
        // Digits from the bit length: log10(2) ≈ 1233 / 4096 gives the count or one less.
        // `m | 1` gives 0 its one digit and compares like `m` with every power of ten above 1.
        let bits = 64 &- (m | 1).leadingZeroBitCount
        var digits = (bits &* 1233) >> 12
        if m | 1 >= PowersOfTen.integer(digits) { digits &+= 1 }
        if v < 0 { byte(UInt8(ascii: "-")) }
        self.digits(m, width: digits)
    }

    /// The eight decimal digits of `v` (below 10^8), leading zeros included, as values 0...9 in
    /// the bytes of one word, the first digit in the lowest byte (`| 0x3030…` makes them ASCII).
    ///
    /// No library formats integers into a caller's buffer without a string in between, and this
    /// runs for the longer numbers of every record: the halves, quarters and digits are split in
    /// parallel lanes of one word, each division a multiply and a shift that is exact for the
    /// lane's range (x·10486 >> 20 = x / 100 below 43,699; x·103 >> 10 = x / 10 below 179).
    @inlinable @inline(__always)
    package static func digitValues(_ v: UInt64) -> UInt64 {
        let high = v / 10_000
        var x = high | (v &- high &* 10_000) << 32
        var q = ((x &* 10486) >> 20) & 0x0000_007F_0000_007F
        x = q | (x &- q &* 100) << 16
        q = ((x &* 103) >> 10) & 0x000F_000F_000F_000F
        return q | (x &- q &* 10) << 8
    }

    @inlinable static var zeros: UInt64 { 0x3030_3030_3030_3030 }

    /// "00" to "99", for numbers of one or two digits (counts, modes, whole degrees).
    @inlinable static var digitPairs: StaticString {
        """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """
    }

    /// Stores the eight bytes of `word`, lowest first, at `i`.
    @inlinable @inline(__always)
    func store(_ word: UInt64, at i: Int) {
        UnsafeMutableRawPointer(base + i).storeBytes(of: word.littleEndian, as: UInt64.self)
    }

    /// Writes `value` (below 10^`width`, `width` at most 20) as `width` decimal digits, leading
    /// zeros included.
    ///
    /// One or two digits from the pair table; more eight per store, left to right: a store may
    /// write up to seven bytes past the number's end, which the following stores or text
    /// overwrite. Every writer's buffer holds ``maxNumberLength`` bytes per number, which leaves
    /// room for them.
    @inlinable @inline(__always)
    mutating func digits(_ value: UInt64, width: Int) {
        let start = count
        count = start &+ width
        if width <= 2 {
            let pair = Self.digitPairs.utf8Start + 2 &* Int(truncatingIfNeeded: value)
            if width == 2 { base[start] = pair[0] }
            base[count &- 1] = pair[1]
            return
        }
        if width <= 8 {
            store(Self.digitValues(value) &>> (64 &- 8 &* UInt64(width)) | Self.zeros, at: start)
            return
        }
        let low = value % 100_000_000
        var rest = value / 100_000_000
        if width <= 16 {
            store(Self.digitValues(rest) &>> (128 &- 8 &* UInt64(width)) | Self.zeros, at: start)
        } else {
            let middle = rest % 100_000_000
            rest /= 100_000_000
            store(Self.digitValues(rest) &>> (192 &- 8 &* UInt64(width)) | Self.zeros, at: start)
            store(Self.digitValues(middle) | Self.zeros, at: start &+ width &- 16)
        }
        store(Self.digitValues(low) | Self.zeros, at: start &+ width &- 8)
    }

    /// Writes the fraction `value` (not zero, below 10^`width`) as `width` digits without
    /// their trailing zeros: the last digit kept is the highest non-zero byte of the digit word.
    @inlinable @inline(__always)
    mutating func fraction(_ value: UInt64, width: Int) {
        let start = count
        if width <= 8 {
            let d = Self.digitValues(value) &>> (64 &- 8 &* UInt64(width))
            store(d | Self.zeros, at: start)
            count = start &+ (71 &- d.leadingZeroBitCount) >> 3
        } else if width <= 16 {
            let low = Self.digitValues(value % 100_000_000)
            let head = Self.digitValues(value / 100_000_000) &>> (128 &- 8 &* UInt64(width))
            store(head | Self.zeros, at: start)
            store(low | Self.zeros, at: start &+ width &- 8)
            count = low != 0 ? start &+ width &- 8 &+ (71 &- low.leadingZeroBitCount) >> 3
                : start &+ (71 &- head.leadingZeroBitCount) >> 3
        } else {
            digits(value, width: width)
            while base[count &- 1] == 0x30 { count &-= 1 }
        }
    }

    /// Same text as ``JSONWriter/appendNumber(_:decimals:to:)``: rounded to `decimals`, without
    /// trailing zeros.
    @inlinable package mutating func number(_ v: Double, decimals: Int) {
        switch decimals {
        case 2: number(v, TwoDecimals.self)
        case 3: number(v, ThreeDecimals.self)
        case 5: number(v, FiveDecimals.self)
        case 9: number(v, NineDecimals.self)
        case 0...18: number(v, decimals: decimals, scale: runtimeScale(decimals))
        default: count = Self.writeShortest(v, base, at: count)  // beyond 18 decimals the scaled value no longer fits the integers used here
        }
    }

    /// ``number(_:decimals:)`` for the decimals the position schema uses: specialised per type,
    /// so the divisions are by constants (multiplications). With the count of decimals as a
    /// value, the compiler merged the cases into one hardware division per number.
    @inlinable @inline(__always)
    package mutating func number<D: FixedDecimals>(_ v: Double, _: D.Type) {
        count = Self.writeFixed(v, D.self, base, at: count)
    }

    /// `number(v, D.self)` at `base + at`; returns the count after it. By value, like
    /// ``writeContents(_:_:at:)``: the count stays in a register.
    @inlinable static func writeFixed<D: FixedDecimals>(_ v: Double, _: D.Type, _ base: UnsafeMutablePointer<UInt8>, at: Int) -> Int {
        var w = RawJSONWriter(base)
        w.count = at
        w.number(v, decimals: D.count, scale: (D.scale, D.divisor))
        return w.count
    }

    /// The body of every `number` overload: `decimals` digits at most, `scale` = 10^decimals.
    @inlinable @inline(__always)
    mutating func number(_ v: Double, decimals: Int, scale: (factor: Double, divisor: UInt64)) {
        guard v.isFinite else { bytes("null"); return }
        let x = abs(v) * scale.factor
        guard x < 9e15 else { count = Self.writeShortest(v, base, at: count); return }
        // `x.rounded()` (half away from zero) without a libm call, in two dependent steps:
        // from 0.5 to 2^52 adding one half is exact, or rounds only up to the next whole
        // number above x + 0.5 when that is where x rounds anyway, so truncating the sum rounds
        // x; below 0.5 the sum can round up to 1 (0.49999999999999994) but x rounds to 0; from
        // 2^52 on every double is a whole number. Through Int64: one instruction, where a
        // conversion to UInt64 takes two paths.
        let n = UInt64(bitPattern: x < 0.5 ? 0 : x < 0x1p52 ? Int64(x + 0.5) : Int64(x))
        let whole = n / scale.divisor
        if v < 0 && n != 0 { byte(UInt8(ascii: "-")) }
        int(Int64(whole))
        let fraction = n &- whole &* scale.divisor
        guard fraction != 0 else { return }
        byte(UInt8(ascii: "."))
        self.fraction(fraction, width: decimals)
    }

    /// Writes the shortest form that reads back exactly, for values fixed-point cannot hold, at
    /// `base + at`; returns the count after it.
    @usableFromInline static func writeShortest(_ v: Double, _ base: UnsafeMutablePointer<UInt8>, at: Int) -> Int {
        var text: [UInt8] = []
        JSONWriter.appendNumber(v, to: &text)
        var w = RawJSONWriter(base)
        w.count = at
        text.withUnsafeBufferPointer { w.bytes($0) }
        return w.count
    }
}

/// A count of decimals fixed at compile time, for ``RawJSONWriter/number(_:_:)``.
@usableFromInline package protocol FixedDecimals {
    static var count: Int { get }
    static var scale: Double { get }
    static var divisor: UInt64 { get }
}

@usableFromInline package enum TwoDecimals: FixedDecimals {
    @inlinable package static var count: Int { 2 }
    @inlinable package static var scale: Double { 1e2 }
    @inlinable package static var divisor: UInt64 { 100 }
}

@usableFromInline package enum ThreeDecimals: FixedDecimals {
    @inlinable package static var count: Int { 3 }
    @inlinable package static var scale: Double { 1e3 }
    @inlinable package static var divisor: UInt64 { 1000 }
}

@usableFromInline package enum FiveDecimals: FixedDecimals {
    @inlinable package static var count: Int { 5 }
    @inlinable package static var scale: Double { 1e5 }
    @inlinable package static var divisor: UInt64 { 100_000 }
}

@usableFromInline package enum NineDecimals: FixedDecimals {
    @inlinable package static var count: Int { 9 }
    @inlinable package static var scale: Double { 1e9 }
    @inlinable package static var divisor: UInt64 { 1_000_000_000 }
}

/// 10^decimals as the factor and the divisor of ``RawJSONWriter/number(_:decimals:)`` (0...18).
@inlinable func runtimeScale(_ decimals: Int) -> (factor: Double, divisor: UInt64) {
    var factor = 1.0
    var divisor: UInt64 = 1
    for _ in 0..<decimals { factor *= 10; divisor &*= 10 }
    return (factor, divisor)
}
