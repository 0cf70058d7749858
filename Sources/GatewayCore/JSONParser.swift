// Reading JSON text into a `JSONValue`: the one parser of every config, gpsd report, exec line,
// replayed JSON line and queued record.

/// Why a JSON text could not be parsed, with the byte offset and line of the problem.
public struct JSONParseError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var offset: Int
    public var line: Int
    public var column: Int
    public var description: String { "line \(line), column \(column): \(message)" }
}


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
        // Where each key is, once the object outgrows a search of its members: with a search per
        // member, one object of 4,096 members cost 8 million key comparisons.
        var keyIndex: [String: Int]?
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            // Members are kept in order; a cap keeps one hostile line from costing minutes.
            guard object.count < JSONParser.maxMembers else { throw error("more than \(JSONParser.maxMembers) members in one object") }
            let keyStart = index
            let key = try parseString()
            let existing: Int?
            if let keyIndex { existing = keyIndex[key] } else { existing = object.members.firstIndex { $0.key == key } }
            if duplicateKeys == .reject, existing != nil {
                index = keyStart
                throw error("duplicate key \"\(key)\"")
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after key \"\(key)\"") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth + 1)
            if let existing {
                // The last value wins, at the first key's place.
                object.replaceValue(at: existing, with: value)
            } else {
                object.appendNewMember(key, value)
                if keyIndex != nil {
                    keyIndex?[key] = object.count - 1
                } else if object.count > JSONObject.linearLookupLimit {
                    keyIndex = Dictionary(uniqueKeysWithValues: object.members.enumerated().map { ($0.element.key, $0.offset) })
                }
            }
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
