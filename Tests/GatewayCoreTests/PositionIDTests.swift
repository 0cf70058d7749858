import Testing
@testable import GatewayCore
import GatewayTesting

/// A numbered id is text written late: every reader must see the same id as if it had been
/// built as a string when the position was made.
@Suite struct PositionIDTests {
    @Test(arguments: numberedIDCases)
    func numberedIdsReadAsTheirText(id: PositionID, text: String) {
        #expect(id.description == text)
        #expect(id == PositionID(text))
        #expect(PositionID(text) == id)
        #expect(id.hashValue == PositionID(text).hashValue)
        var p = Position(source: "rx")
        p.identifier = id
        #expect(p.id == text)
        #expect(p == Position(source: "rx", id: text))
        // The JSON encoder writes the parts directly (PositionEncodingTests checks its text).
        #expect(id.numberedParts.map { $0.prefix + ($0.marker == 0 ? "" : String(UnicodeScalar($0.marker))) + String($0.number) } == text)
    }

    @Test func differentIdsDiffer() {
        #expect(PositionID(prefix: "rx-", number: 1) != PositionID(prefix: "rx-", number: 2))
        #expect(PositionID(prefix: "rx-", number: 12) != PositionID(prefix: "rx-1", number: 21))
        // Different parts, same text: the same id.
        #expect(PositionID(prefix: "rx-1", number: 2) == PositionID(prefix: "rx-", number: 12))
        #expect(PositionID(prefix: "rx-", marker: UInt8(ascii: "n"), number: 1) == PositionID(prefix: "rx-n", number: 1))
        #expect(!PositionID(prefix: "", number: 0).isEmpty)
        #expect(PositionID("").isEmpty)
        #expect(PositionID("rx-12").numberedParts == nil)
    }

    @Test func settingTheTextReplacesTheParts() {
        var p = Position(source: "rx")
        p.identifier = PositionID(prefix: "rx-", number: 5)
        p.id += "-1"
        #expect(p.id == "rx-5-1")
        #expect(p.identifier.numberedParts == nil)
    }
}
