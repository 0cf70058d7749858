import GatewayCore
import GatewayTesting
import Testing

/// A sink's attribute cache may only save work: every record must be the text written without it.
@Suite struct AttributeCacheTests {
    @Test func recordsWithTheCacheAreThoseWithout() {
        var random = SeededGenerator(seed: 7)
        let shared = ["fences": "depot", "fence_names": "Depot", "fleet": "north"]
        let choices: [[String: String]] = [
            shared, shared, [:], ["fleet": "north"], ["fleet": "south"], ["a\"b": "c\\d\n", "z": "1"],
            ["fences": "depot,yard", "fence_names": "Depot,Yard", "fleet": "north"],
        ]
        var cache = PositionJSON.AttributeCache()
        var withCache: [UInt8] = [], without: [UInt8] = []
        for i in 0..<2_000 {
            var attributes = choices[Int.random(in: 0..<choices.count, using: &random)]
            if i % 13 == 0, !attributes.isEmpty { attributes["fleet"] = "changed-\(i)" }  // same keys, new value
            var p = Position(latitude: 31.2, longitude: 121.4, mode: .twoD, source: "rx", id: "rx-\(i)", attributes: attributes)
            if i % 17 == 0 { p.event = PositionEvent(kind: .enter, fenceId: "depot", fenceName: "Depot") }
            PositionFormat.jsonl.appendRecord(p, to: &withCache, cache: &cache)
            PositionFormat.jsonl.appendRecord(p, to: &without)
        }
        #expect(withCache == without)
        #expect(String(decoding: without, as: UTF8.self).contains(#""attributes":{"fence_names":"Depot","fences":"depot","fleet":"north"}"#))
    }
}
