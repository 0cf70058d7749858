/// A parsed JSON document that keeps object keys in their written order.
///
/// The configuration loader needs key order (errors are reported in file order) and exact
/// number/bool distinction, which `JSONSerialization` blurs on Linux; gpsd reports and
/// JSON Lines input are parsed with the same small byte-level parser.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A short name of the value's kind for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }

    /// A string, number or boolean as text (whole numbers without `.0`), for values that are
    /// strings to us but may be written as numbers (attributes, ids); nil for other kinds.
    public var scalarText: String? {
        switch self {
        case .string(let s): return s
        case .number(let n): return n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b): return String(b)
        default: return nil
        }
    }
    public var numberValue: Double? { if case .number(let n) = self { return n }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var objectValue: JSONObject? { if case .object(let o) = self { return o }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }

    /// The same value with every object's keys sorted, so two documents that differ only in key
    /// order compare equal (configuration reloads compare components this way).
    public var sortingKeys: JSONValue {
        switch self {
        case .array(let a): return .array(a.map(\.sortingKeys))
        case .object(let o): return .object(JSONObject(o.members.sorted { $0.key < $1.key }.map { ($0.key, $0.value.sortingKeys) }))
        default: return self
        }
    }
}

/// A JSON object: ordered members with a lookup by key (last duplicate wins, as in most parsers).
public struct JSONObject: Sendable, Hashable, Sequence {
    public private(set) var members: [(key: String, value: JSONValue)] = []

    public init() {}

    public init(_ members: [(String, JSONValue)]) {
        for (k, v) in members { self[k] = v }
    }

    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.members.count == b.members.count && zip(a.members, b.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into h: inout Hasher) {
        for m in members { h.combine(m.key); h.combine(m.value) }
    }

    public var keys: [String] { members.map(\.key) }
    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }

    public subscript(key: String) -> JSONValue? {
        get { members.last(where: { $0.key == key })?.value }
        set {
            if let i = members.firstIndex(where: { $0.key == key }) {
                if let v = newValue { members[i].value = v } else { members.remove(at: i) }
            } else if let v = newValue {
                members.append((key, v))
            }
        }
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> { members.makeIterator() }
}

/// Why a JSON text could not be parsed, with the byte offset and line of the problem.
public struct JSONParseError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var offset: Int
    public var line: Int
    public var column: Int
    public var description: String { "line \(line), column \(column): \(message)" }
}

// MARK: - Parsing

/// What the parser does with a key written twice in one object (RFC 8259 leaves it open).
public enum JSONDuplicateKeys: Sendable {
    /// The last value wins, at the first key's place: what most parsers do, for data from peers.
    case lastWins
    /// An error at the second key: for files people write, where a repeated key is a mistake
    /// (two `"path"` options, say) that would otherwise go unnoticed.
    case reject
}

extension JSONValue {
    /// Parses a complete JSON text (UTF-8). Nesting deeper than `maxDepth` is an error, so hostile
    /// input cannot exhaust the stack.
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 64, duplicateKeys: JSONDuplicateKeys = .lastWins) throws(JSONParseError) -> JSONValue {
        var p = JSONParser(bytes: bytes, maxDepth: maxDepth, duplicateKeys: duplicateKeys)
        p.skipByteOrderMark()
        p.skipWhitespace()
        let v = try p.parseValue(depth: 0)
        p.skipWhitespace()
        if p.index != bytes.count { throw p.error("unexpected text after the JSON value") }
        return v
    }

    /// Parses a JSON text given as a string or byte array.
    public static func parse(_ text: some Collection<UInt8>, maxDepth: Int = 64, duplicateKeys: JSONDuplicateKeys = .lastWins) throws(JSONParseError) -> JSONValue {
        let array = Array(text)
        let result: Result<JSONValue, JSONParseError> = array.withUnsafeBytes { raw in
            do throws(JSONParseError) { return .success(try JSONValue.parse(raw, maxDepth: maxDepth, duplicateKeys: duplicateKeys)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    public static func parse(string: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(string.utf8))
    }
}

/// A byte-level RFC 8259 parser. What it does with each class of input (checked by
/// Tests/GatewayCoreTests/JSONConformanceTests.swift):
/// - Text must be UTF-8: invalid sequences in a string (stray bytes, overlong forms, encoded
///   surrogates, code points above U+10FFFF) are an error, never repaired into U+FFFD — a
///   repaired id or device name would silently become another one. One leading byte order mark
///   is skipped (RFC 8259 §8.1 allows it; editors write it).
/// - Escapes: `\uXXXX` surrogate pairs become one scalar; a lone or reversed surrogate is an error.
/// - Numbers are `Double`: leading zeros, `+`, a bare `.`, NaN and Infinity are errors; a
///   magnitude beyond `Double` is an error ("number out of range"); integers beyond 2^53 lose
///   their low digits and underflow reads as 0, as strtod does.
/// - Nesting deeper than `maxDepth` (64) and objects of more than 4,096 members are errors, so
///   one hostile line costs neither the stack nor minutes.
/// - Duplicate keys: see `JSONDuplicateKeys` (configuration files reject them).
/// - Trailing commas, comments, single quotes and control characters in strings are errors.
struct JSONParser {
    static let maxMembers = 4096
    let bytes: UnsafeRawBufferPointer
    let maxDepth: Int
    let duplicateKeys: JSONDuplicateKeys
    var index = 0

    init(bytes: UnsafeRawBufferPointer, maxDepth: Int, duplicateKeys: JSONDuplicateKeys = .lastWins) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.duplicateKeys = duplicateKeys
    }

    mutating func skipByteOrderMark() {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
    }

    /// A byte as it may appear in a message: printable ASCII as is, control characters as a
    /// JSON escape (a raw NUL or ESC must not reach a log line), other bytes in hex.
    static func describe(_ b: UInt8) -> String {
        if b >= 0x20 && b < 0x7F { return "character '\(Unicode.Scalar(b))'" }
        if b < 0x80 {
            let hex = String(b, radix: 16, uppercase: true)
            return "character '\\u\(String(repeating: "0", count: 4 - hex.count))\(hex)'"
        }
        return "byte 0x\(String(b, radix: 16, uppercase: true))"
    }

    func error(_ message: String) -> JSONParseError {
        var line = 1, col = 1
        for i in 0..<min(index, bytes.count) {
            if bytes[i] == 10 { line += 1; col = 1 } else { col += 1 }
        }
        return JSONParseError(message: message, offset: index, line: line, column: col)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            let c = bytes[index]
            guard c == 32 || c == 9 || c == 10 || c == 13 else { return }
            index += 1
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < maxDepth else { throw error("nesting deeper than \(maxDepth) levels") }
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected \(JSONParser.describe(bytes[index]))")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let n = word.utf8CodeUnitCount
        guard index + n <= bytes.count else { throw error("unexpected end of input") }
        for k in 0..<n where bytes[index + k] != word.utf8Start[k] {
            throw error("invalid literal")
        }
        index += n
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        index += 1
        var object = JSONObject()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            // Members are kept in order with a linear lookup (fine for the objects real input has);
            // a cap keeps one hostile line from costing minutes.
            guard object.count < JSONParser.maxMembers else { throw error("more than \(JSONParser.maxMembers) members in one object") }
            let keyStart = index
            let key = try parseString()
            if duplicateKeys == .reject, object[key] != nil {
                index = keyStart
                throw error("duplicate key \"\(key)\"")
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after key \"\(key)\"") }
            index += 1
            skipWhitespace()
            object[key] = try parseValue(depth: depth + 1)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw error("expected ',' or '}' in an object")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw error("expected ',' or ']' in an array")
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                guard let s = String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self) else {
                    throw error("invalid UTF-8 in a string")
                }
                index += 1
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw error("control character in a string") }
            index += 1
        }
        var out = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                guard let s = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
                index += 1
                return s
            }
            if c < 0x20 { throw error("control character in a string") }
            if c != UInt8(ascii: "\\") { out.append(c); index += 1; continue }
            index += 1
            guard index < bytes.count else { break }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate in a string")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate in a string") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(scalar) else { throw error("unpaired surrogate in a string") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw error("invalid escape '\\\(Unicode.Scalar(e))'")
            }
        }
        throw error("unterminated string")
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated unicode escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 65...70: d = UInt32(c - 55)
            case 97...102: d = UInt32(c - 87)
            default: throw error("invalid hex digit in a unicode escape")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func parseNumber() throws(JSONParseError) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "0"), bytes[index + 1] >= 48, bytes[index + 1] <= 57 {
            throw error("leading zero in a number")
        }
        var digits = 0
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 { index += 1; digits += 1 }
        guard digits > 0 else { throw error("invalid number") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var frac = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 { index += 1; frac += 1 }
            guard frac > 0 else { throw error("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            var exp = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 { index += 1; exp += 1 }
            guard exp > 0 else { throw error("invalid number") }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let v = Double(text) else { throw error("invalid number") }
        guard v.isFinite else { throw error("number out of range") }
        return v
    }
}

// MARK: - Writing

/// Appends JSON text to a byte buffer; used by every JSON encoder in the project.
public enum JSONWriter {
    /// Appends `s` as a quoted JSON string with the required escapes.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { utf8 in
            // Fast path: nothing to escape (ids, sources, datums), so one bulk copy.
            var clean = true
            for c in utf8 where c < 0x20 || c == 0x22 || c == 0x5C { clean = false; break }
            out.append(0x22)
            if clean {
                out.append(contentsOf: utf8)
            } else {
                appendEscaped(utf8, to: &out)
            }
            out.append(0x22)
        }
    }

    private static func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        for c in utf8 {
            switch c {
            case 0x22: out.append(0x5C); out.append(0x22)
            case 0x5C: out.append(0x5C); out.append(0x5C)
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 48, 48, hex[Int(c >> 4)], hex[Int(c & 15)]])
            default: out.append(c)
            }
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
        count += 1
    }

    @inline(__always)
    mutating func bytes(_ s: StaticString) {
        (base + count).update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        count += s.utf8CodeUnitCount
    }

    @inline(__always)
    mutating func bytes(_ b: UnsafeBufferPointer<UInt8>) {
        guard let start = b.baseAddress else { return }
        (base + count).update(from: start, count: b.count)
        count += b.count
    }

    /// Same text as ``JSONWriter/appendString(_:to:)``.
    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            byte(0x22)
            for c in utf8 {
                switch c {
                case 0x22: byte(0x5C); byte(0x22)
                case 0x5C: byte(0x5C); byte(0x5C)
                case 0x0A: byte(0x5C); byte(UInt8(ascii: "n"))
                case 0x0D: byte(0x5C); byte(UInt8(ascii: "r"))
                case 0x09: byte(0x5C); byte(UInt8(ascii: "t"))
                case 0..<0x20:
                    let hex: StaticString = "0123456789abcdef"
                    bytes("\\u00")
                    byte(hex.utf8Start[Int(c >> 4)])
                    byte(hex.utf8Start[Int(c & 15)])
                default: byte(c)
                }
            }
            byte(0x22)
        }
    }

    /// Same text as ``JSONWriter/appendInt(_:to:)``.
    @inline(__always)
    mutating func int(_ v: Int64) {
        var m = v.magnitude
        var digits = 1
        var t = m
        while t >= 10 { t /= 10; digits += 1 }
        if v < 0 { byte(UInt8(ascii: "-")) }
        var i = count + digits
        count = i
        repeat { i -= 1; base[i] = UInt8(truncatingIfNeeded: 48 &+ m % 10); m /= 10 } while m > 0
    }

    /// Same text as ``JSONWriter/appendNumber(_:decimals:to:)``: rounded to `decimals`, without
    /// trailing zeros.
    mutating func number(_ v: Double, decimals: Int) {
        guard v.isFinite else { bytes("null"); return }
        var scale: Double
        switch decimals {
        case 2: scale = 1e2
        case 3: scale = 1e3
        case 9: scale = 1e9
        default:
            scale = 1
            for _ in 0..<decimals { scale *= 10 }
        }
        let x = abs(v) * scale
        // `x.rounded()` (half away from zero) without a libm call: below 2^53 the integer
        // part and the remainder are exact.
        var n: UInt64 = 0
        if x < 9e15 {
            n = UInt64(x)
            if x - Double(n) >= 0.5 { n += 1 }
        }
        guard x < 9e15, n < 9_000_000_000_000_000 else {
            var text: [UInt8] = []
            JSONWriter.appendNumber(v, to: &text)
            text.withUnsafeBufferPointer { bytes($0) }
            return
        }
        // The decimals the schema uses get constant divisors (multiplications, not divisions).
        let whole: UInt64
        switch decimals {
        case 2: whole = n / 100
        case 3: whole = n / 1000
        case 9: whole = n / 1_000_000_000
        default: whole = n / UInt64(scale)
        }
        if v < 0 && n != 0 { byte(UInt8(ascii: "-")) }
        int(Int64(whole))
        n -= whole * UInt64(scale)
        guard n != 0 else { return }
        var k = decimals
        // Trailing zeros of the fraction are not written; leading ones are.
        while n % 10 == 0 { n /= 10; k -= 1 }
        byte(UInt8(ascii: "."))
        var i = count + k
        count = i
        while i > count - k { i -= 1; base[i] = UInt8(truncatingIfNeeded: 48 &+ n % 10); n /= 10 }
    }
}
