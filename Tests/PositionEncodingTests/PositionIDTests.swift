import GatewayCore
import PositionEncoding
import Testing

/// A numbered id is text written late: the JSON encoder, which writes its parts directly, must
/// write the same string as the id built as text.
@Suite struct PositionIDTests {
    @Test(arguments: [
        (PositionID(prefix: "rx-", number: 1_584_538_100_600), "rx-1584538100600"),
        (PositionID(prefix: "rx-", marker: UInt8(ascii: "n"), number: 7), "rx-n7"),
        (PositionID(prefix: "", number: 0), "0"),
        (PositionID(prefix: "a\"b\\", number: -42), "a\"b\\-42"),
        (PositionID(prefix: "p", number: Int64.min), "p-9223372036854775808"),
        (PositionID(prefix: "p", number: Int64.max), "p9223372036854775807"),
        (PositionID(prefix: "p", number: 9), "p9"),
        (PositionID(prefix: "p", number: 10), "p10"),
    ])
    func numberedIdsAreWrittenAsTheirText(id: PositionID, text: String) {
        var p = Position(source: "rx")
        p.identifier = id
        // The JSON encoder writes the parts directly: the same string as the text, escaped.
        var expected: [UInt8] = []
        JSONWriter.appendString(text, to: &expected)
        let json = PositionJSON.string(p)
        let member = #"{"class":"TPV","id":"# + String(decoding: expected, as: UTF8.self) + ","
        #expect(json.hasPrefix(member), "\(json)")
    }

    @Test func settingTheTextReplacesTheParts() {
        var p = Position(source: "rx")
        p.identifier = PositionID(prefix: "rx-", number: 5)
        p.id += "-1"
        #expect(PositionJSON.string(p).contains(#""id":"rx-5-1""#))
    }
}
