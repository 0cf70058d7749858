import GatewayCore
import Testing

/// The JSON parser against RFC 8259, class by class. Each class has a decision, written in
/// `JSONParser`'s doc comment and checked here: every config, gpsd report, exec line, replayed
/// JSON line and queued record goes through this parser, so what it accepts is a contract.
@Suite struct JSONConformanceTests {
    static func parse(_ bytes: [UInt8], duplicateKeys: JSONDuplicateKeys = .lastWins) -> Result<JSONValue, JSONParseError> {
        do throws(JSONParseError) { return .success(try JSONValue.parse(bytes, duplicateKeys: duplicateKeys)) } catch { return .failure(error) }
    }

    static func parse(_ text: String) -> Result<JSONValue, JSONParseError> { parse(Array(text.utf8)) }

    static func message(_ r: Result<JSONValue, JSONParseError>) -> String? {
        if case .failure(let e) = r { return e.message }
        return nil
    }

    // MARK: - Accepted

    @Test(arguments: [
        (#"{"a":[1,-2.5,3e2,-0,0.5E-3],"b":{"c":null,"d":true,"e":false},"f":"x"}"#, "object"),
        (#"  [ ]  "#, "empty array with whitespace"),
        ("{\t\"a\"\r\n:\n1 }", "the four whitespace characters"),
        (#""just a string""#, "a scalar at the top"),
        (#"1"#, "a number at the top"),
        (#""\"\\\/\b\f\n\r\t""#, "every simple escape"),
        (#""\u00e9\u4E2D""#, "BMP escapes, either case"),
    ])
    func acceptsValidDocuments(text: String, what: String) {
        #expect(Self.message(Self.parse(text)) == nil, "\(what)")
    }

    /// The writer's escapes: the two-character ones where JSON has them, `\u00XX` (lowercase) for
    /// the other control characters, everything else (UTF-8 included) as it is; and it reads back.
    @Test func writesTheRequiredEscapesAndReadsBack() throws {
        let text = "a\"b\\c/\n\r\t\u{1}\u{1f}é中"
        var out: [UInt8] = []
        JSONWriter.appendString(text, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #""a\"b\\c/\n\r\t\u0001\u001fé中""#)
        #expect(try JSONValue.parse(out) == .string(text))
    }

    @Test func keepsKeysInWrittenOrderAndNumbersDistinctFromBooleans() throws {
        let v = try JSONValue.parse(string: #"{"z":1,"a":true,"m":"1"}"#)
        #expect(v.objectValue?.keys == ["z", "a", "m"])
        #expect(v["z"] == .number(1))
        #expect(v["a"] == .bool(true))
        #expect(v["m"] == .string("1"))
    }

    @Test func decodesASurrogatePairToOneScalar() throws {
        #expect(try JSONValue.parse(string: #""\ud83d\udccd""#) == .string("📍"))
        // Raw UTF-8 of the same character, four bytes, is kept as is.
        #expect(try JSONValue.parse(string: "\"📍\"") == .string("📍"))
    }

    @Test func acceptsAndSkipsOneLeadingByteOrderMark() throws {
        // Editors on Windows write one; RFC 8259 §8.1 lets a parser ignore it.
        #expect(try JSONValue.parse([0xEF, 0xBB, 0xBF] + Array(#"{"a":1}"#.utf8)) == .object(JSONObject([("a", .number(1))])))
        #expect(Self.message(Self.parse([0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + Array("1".utf8))) != nil)
    }

    @Test func readsLargeAndTinyNumbersAsDoubles() throws {
        // Integers beyond 2^53 lose their low digits (documented: ids belong in strings).
        #expect(try JSONValue.parse(string: "18446744073709551616") == .number(18446744073709551616.0))
        #expect(try JSONValue.parse(string: "1.7976931348623157e308") == .number(.greatestFiniteMagnitude))
        // Underflow reads as zero, as strtod does.
        #expect(try JSONValue.parse(string: "1e-400") == .number(0))
        #expect(try JSONValue.parse(string: "-0") == .number(-0.0))
    }

    @Test func nestingUpToTheLimitIsAcceptedOneMoreIsAnError() {
        let ok = String(repeating: "[", count: 63) + String(repeating: "]", count: 63)
        #expect(Self.message(Self.parse(ok)) == nil)
        let deep = String(repeating: "[", count: 100_000)
        #expect(Self.message(Self.parse(deep)) == "nesting deeper than 64 levels")
    }

    // MARK: - Duplicate keys

    @Test func aDuplicateKeyKeepsTheLastValueByDefault() throws {
        let v = try JSONValue.parse(string: #"{"a":1,"b":2,"a":3}"#)
        #expect(v["a"] == .number(3))
        #expect(v.objectValue?.keys == ["a", "b"])
    }

    @Test func aDuplicateKeyIsAnErrorWhereAskedWithItsPosition() {
        let r = Self.parse(Array("{\"a\":1,\n \"a\":2}".utf8), duplicateKeys: .reject)
        guard case .failure(let e) = r else { Issue.record("accepted a duplicate key"); return }
        #expect(e.message == #"duplicate key "a""#)
        #expect(e.line == 2)
        #expect(e.column == 2)
    }

    // MARK: - Rejected

    @Test(arguments: [
        ("", "unexpected end of input"),
        ("   ", "unexpected end of input"),
        ("[1,]", "unexpected character ']'"),
        (#"{"a":1,}"#, "expected a string key"),
        ("[1 2]", "expected ',' or ']' in an array"),
        (#"{"a" 1}"#, #"expected ':' after key "a""#),
        ("{'a':1}", "expected a string key"),
        ("01", "leading zero in a number"),
        ("-01", "leading zero in a number"),
        ("1.", "invalid number"),
        (".5", "unexpected character '.'"),
        ("+1", "unexpected character '+'"),
        ("1e", "invalid number"),
        ("1e400", "number out of range"),
        ("-1e400", "number out of range"),
        ("NaN", "unexpected character 'N'"),
        ("Infinity", "unexpected character 'I'"),
        ("tru", "unexpected end of input"),
        ("nul1", "invalid literal"),
        ("[1] x", "unexpected text after the JSON value"),
        ("\"a\u{1}b\"", "control character in a string"),
        ("\"tab\there\"", "control character in a string"),
        (#""\x41""#, #"invalid escape '\x'"#),
        (#""\u12""#, "truncated unicode escape"),
        (#""\u12G4""#, "invalid hex digit in a unicode escape"),
        (#""\ud83d""#, "unpaired surrogate in a string"),
        (#""\ud83d\u0041""#, "unpaired surrogate in a string"),
        (#""\udccd""#, "unpaired surrogate in a string"),
        (#""abc"#, "unterminated string"),
        ("\u{0}", #"unexpected character '\u0000'"#),
        ("\u{1b}[31m", #"unexpected character '\u001B'"#),
    ])
    func rejectsInvalidDocuments(text: String, expected: String) {
        #expect(Self.message(Self.parse(text)) == expected, "\(text.debugDescription)")
    }

    @Test(arguments: [
        ([0x22, 0xFF, 0x22], "a byte that never occurs in UTF-8"),
        ([0x22, 0xC3, 0x22], "a truncated two-byte sequence"),
        ([0x22, 0xC0, 0xAF, 0x22], "an overlong encoding of '/'"),
        ([0x22, 0xED, 0xA0, 0x80, 0x22], "a surrogate encoded in UTF-8"),
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "a code point above U+10FFFF"),
        ([0x22, 0x5C, 0x6E, 0xE9, 0x22], "Latin-1 after an escape (slow path)"),
    ] as [([UInt8], String)])
    func rejectsInvalidUTF8InsteadOfRepairingIt(bytes: [UInt8], what: String) {
        #expect(Self.message(Self.parse(bytes)) == "invalid UTF-8 in a string", "\(what)")
    }

    @Test func aStrayHighByteOutsideAStringIsNamedInHex() {
        #expect(Self.message(Self.parse([0xFF, 0x00])) == "unexpected byte 0xFF")
    }

    @Test func anErrorNamesItsLineColumnAndOffset() {
        guard case .failure(let e) = Self.parse("{\n  \"a\": [1,\n  2,,3]\n}") else { Issue.record("accepted"); return }
        #expect(e.line == 3)
        #expect(e.column == 5)
        #expect(e.offset == 17)
        #expect(e.description == "line 3, column 5: unexpected character ','")
    }

    @Test func anObjectWithTooManyMembersIsRefused() {
        let members = (0...4096).map { "\"k\($0)\":0" }.joined(separator: ",")
        #expect(Self.message(Self.parse("{\(members)}")) == "more than 4096 members in one object")
    }

    // MARK: - Round trip with the writer

    @Test func whatTheWriterWritesReadsBackEqual() throws {
        let value = JSONValue.object(JSONObject([
            ("s", .string("quote \" backslash \\ nul \u{0} bell \u{7} é 中 📍")),
            ("n", .array([.number(0), .number(-1.5), .number(1e-9), .number(123456789012), .number(.greatestFiniteMagnitude)])),
            ("b", .bool(false)), ("z", .null), ("o", .object(JSONObject())),
        ]))
        let text = value.jsonText
        #expect(try JSONValue.parse(string: text) == value)
        #expect(!text.utf8.contains { $0 < 0x20 }, "control characters are escaped")
    }
}
