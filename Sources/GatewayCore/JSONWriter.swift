// Writing JSON text: `JSONWriter` for any value, `RawJSONWriter` for position records written
// into memory sized up front (the hot path of every JSON encoder of positions).

/// Appends JSON text to a byte buffer; used by every JSON encoder in the project.
public enum JSONWriter {
    /// Appends `s` as a quoted JSON string with the required escapes (``RawJSONWriter``'s).
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
    public static func appendNumber(_ v: Double, decimals: Int, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: RawJSONWriter.maxNumberLength) { buf in
            guard let base = buf.baseAddress else { return }
            var w = RawJSONWriter(base)
            w.number(v, decimals: decimals)
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
        }
    }

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
struct RawJSONWriter {
    /// Room one number can take: a 16-digit fixed-point value with sign and 20 decimals, or a
    /// shortest-form `Double` such as `-1.7976931348623157e+308`.
    static let maxNumberLength = 48

    let base: UnsafeMutablePointer<UInt8>
    /// Bytes written so far.
    private(set) var count = 0

    init(_ base: UnsafeMutablePointer<UInt8>) { self.base = base }

    /// Room `s` can take as a quoted, escaped JSON string.
    static func maxStringLength(_ s: String) -> Int { 2 + 6 * s.utf8.count }

    @inline(__always)
    mutating func byte(_ b: UInt8) {
        base[count] = b
        count &+= 1
    }

    @inline(__always)
    mutating func bytes(_ s: StaticString) {
        (base + count).update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        count &+= s.utf8CodeUnitCount
    }

    @inline(__always)
    mutating func bytes(_ b: UnsafeBufferPointer<UInt8>) {
        guard let start = b.baseAddress else { return }
        (base + count).update(from: start, count: b.count)
        count &+= b.count
    }

    /// Room `id` can take as a quoted, escaped JSON string.
    static func maxLength(of id: PositionID) -> Int {
        switch id.storage {
        case .text(let s): maxStringLength(s)
        case .numbered(let prefix, _, _): maxStringLength(prefix) + 1 + maxNumberLength
        }
    }

    /// `v` (0...99) as two digits, a leading zero included.
    @inline(__always)
    mutating func twoDigits(_ v: Int) {
        byte(UInt8(truncatingIfNeeded: 48 &+ v / 10))
        byte(UInt8(truncatingIfNeeded: 48 &+ v % 10))
    }

    /// `s` as a quoted JSON string with the required escapes.
    @inline(__always)
    mutating func string(_ s: String) {
        byte(0x22)
        count = Self.writeContents(s, base, at: count)
        byte(0x22)
    }

    /// The text of `id` as a JSON string, written from its parts.
    @inline(__always)
    mutating func string(_ id: PositionID) {
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
    /// Out of line and by value, like ``writeShortest(_:_:at:)``: a writer whose address is never
    /// passed to a call keeps its count in a register while the position is written; passed
    /// once, it is stored to memory after every byte.
    private static func writeContents(_ s: String, _ base: UnsafeMutablePointer<UInt8>, at: Int) -> Int {
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
    @inline(__always)
    mutating func int(_ v: Int64) {
        let m = v.magnitude
        // Digits counted by multiplying up (10^19 is the last power below 2^64).
        var digits = 1
        var power: UInt64 = 10
        while digits < 20 && m >= power { digits += 1; power = power &* 10 }
        if v < 0 { byte(UInt8(ascii: "-")) }
        self.digits(m, width: digits)
    }

    /// "00" to "99": two digits per division.
    private static let digitPairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """

    /// Writes the last `width` decimal digits of `value`, leading zeros included.
    @inline(__always)
    private mutating func digits(_ value: UInt64, width: Int) {
        var n = value
        let start = count
        var i = start + width
        count = i
        let pairs = Self.digitPairs.utf8Start
        while i - start >= 2 {
            let r = Int(truncatingIfNeeded: n % 100)
            n /= 100
            i -= 2
            base[i] = pairs[2 &* r]
            base[i + 1] = pairs[2 &* r &+ 1]
        }
        if i > start { base[start] = UInt8(truncatingIfNeeded: 48 &+ n % 10) }
    }

    /// Same text as ``JSONWriter/appendNumber(_:decimals:to:)``: rounded to `decimals`, without
    /// trailing zeros.
    mutating func number(_ v: Double, decimals: Int) {
        switch decimals {
        case 2: number(v, TwoDecimals.self)
        case 3: number(v, ThreeDecimals.self)
        case 9: number(v, NineDecimals.self)
        case 0...18: number(v, decimals: decimals, scale: runtimeScale(decimals))
        default: count = Self.writeShortest(v, base, at: count)  // beyond 18 decimals the scaled value no longer fits the integers used here
        }
    }

    /// ``number(_:decimals:)`` for the decimals the position schema uses: specialised per type,
    /// so the divisions are by constants (multiplications). With the count of decimals as a
    /// value, the compiler merged the cases into one hardware division per number.
    @inline(__always)
    mutating func number<D: FixedDecimals>(_ v: Double, _: D.Type) {
        number(v, decimals: D.count, scale: (D.scale, D.divisor))
    }

    /// The body of every `number` overload: `decimals` digits at most, `scale` = 10^decimals.
    @inline(__always)
    private mutating func number(_ v: Double, decimals: Int, scale: (factor: Double, divisor: UInt64)) {
        guard v.isFinite else { bytes("null"); return }
        let x = abs(v) * scale.factor
        // `x.rounded()` (half away from zero) without a libm call: below 2^53 the integer
        // part and the remainder are exact.
        guard x < 9e15 else { count = Self.writeShortest(v, base, at: count); return }
        var n = UInt64(x)
        if x - Double(n) >= 0.5 { n &+= 1 }
        let whole = n / scale.divisor
        if v < 0 && n != 0 { byte(UInt8(ascii: "-")) }
        int(Int64(whole))
        let fraction = n &- whole &* scale.divisor
        guard fraction != 0 else { return }
        byte(UInt8(ascii: "."))
        digits(fraction, width: decimals)
        // Trailing zeros of the fraction are not written; a digit before them is not a zero.
        while base[count &- 1] == 0x30 { count &-= 1 }
    }

    /// Writes the shortest form that reads back exactly, for values fixed-point cannot hold, at
    /// `base + at`; returns the count after it.
    private static func writeShortest(_ v: Double, _ base: UnsafeMutablePointer<UInt8>, at: Int) -> Int {
        var text: [UInt8] = []
        JSONWriter.appendNumber(v, to: &text)
        var w = RawJSONWriter(base)
        w.count = at
        text.withUnsafeBufferPointer { w.bytes($0) }
        return w.count
    }
}

/// A count of decimals fixed at compile time, for ``RawJSONWriter/number(_:_:)``.
protocol FixedDecimals {
    static var count: Int { get }
    static var scale: Double { get }
    static var divisor: UInt64 { get }
}

enum TwoDecimals: FixedDecimals {
    static var count: Int { 2 }
    static var scale: Double { 1e2 }
    static var divisor: UInt64 { 100 }
}

enum ThreeDecimals: FixedDecimals {
    static var count: Int { 3 }
    static var scale: Double { 1e3 }
    static var divisor: UInt64 { 1000 }
}

enum NineDecimals: FixedDecimals {
    static var count: Int { 9 }
    static var scale: Double { 1e9 }
    static var divisor: UInt64 { 1_000_000_000 }
}

/// 10^decimals as the factor and the divisor of ``RawJSONWriter/number(_:decimals:)`` (0...18).
private func runtimeScale(_ decimals: Int) -> (factor: Double, divisor: UInt64) {
    var factor = 1.0
    var divisor: UInt64 = 1
    for _ in 0..<decimals { factor *= 10; divisor &*= 10 }
    return (factor, divisor)
}
