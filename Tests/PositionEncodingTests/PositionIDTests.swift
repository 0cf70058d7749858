import GatewayCore
import GatewayTesting
import PositionEncoding
import Testing

/// A numbered id is text written late: the JSON encoder, which writes its parts directly, must
/// write the same string as the id built as text.
@Suite struct PositionIDTests {
    @Test(arguments: numberedIDCases)
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
