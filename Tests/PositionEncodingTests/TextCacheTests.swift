import GatewayCore
import GatewayTesting
import PositionEncoding
import Testing

/// A sink's text cache may only save work: every record must be the text written without it.
@Suite struct TextCacheTests {
    @Test func recordsWithTheCacheAreThoseWithout() {
        var random = SeededGenerator(seed: 7)
        let shared = ["fences": "depot", "fence_names": "Depot", "fleet": "north"]
        let choices: [[String: String]] = [
            shared, shared, [:], ["fleet": "north"], ["fleet": "south"], ["a\"b": "c\\d\n", "z": "1"],
            ["fences": "depot,yard", "fence_names": "Depot,Yard", "fleet": "north"],
        ]
        var cache = PositionJSON.TextCache()
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

    /// Sources, id prefixes, devices, datums and days that repeat for a while and then change, among
    /// them strings that need escapes, long (heap) strings, empty ones and days around the
    /// epoch, leap days and the clamped years.
    @Test func repeatedStringsAndDaysAreThoseWithout() {
        var random = SeededGenerator(seed: 11)
        let sources = ["rx", "rx", "gnss-receiver-on-the-roof-of-depot-7", "a\"b\\c", "", "é✓"]
        let prefixes = ["rx-", "", "x\ty-", "a-very-long-prefix-for-a-numbered-identifier-"]
        let datums: [Datum] = [.wgs84, .gcj02, .bd09, Datum(name: "EPSG:32651"), Datum(name: "q\"")]
        let days: [Int64] = [0, -1, 19_844, 19_845, 11_016, -719_528, 2_932_896, 2_932_897, -800_000]
        let devices: [String?] = [nil, "unit-1", "/dev/ttyACM0", "serial \"7\"", "a-device-name-longer-than-fifteen-bytes"]
        var source = sources[0], prefix = prefixes[0], datum = datums[0], day = days[0], device = devices[0]
        var cache = PositionJSON.TextCache()
        var mismatches: [Int] = [], badText: [String] = []
        for i in 0..<3_000 {
            // Each part changes now and then, so runs of equal values alternate with changes.
            if Int.random(in: 0..<10, using: &random) == 0 { source = sources.randomElement(using: &random)! }
            if Int.random(in: 0..<10, using: &random) == 0 { prefix = prefixes.randomElement(using: &random)! }
            if Int.random(in: 0..<10, using: &random) == 0 { datum = datums.randomElement(using: &random)! }
            if Int.random(in: 0..<10, using: &random) == 0 { day = days.randomElement(using: &random)! }
            if Int.random(in: 0..<10, using: &random) == 0 { device = devices.randomElement(using: &random)! }
            let ms = day * 86_400_000 + Int64.random(in: 0..<86_400_000, using: &random)
            var p = Position(time: Timestamp(milliseconds: ms), latitude: 31.2, longitude: 121.4, mode: .threeD,
                             datum: datum, source: source, device: device)
            switch i % 5 {
            case 0: p.id = "text-\(i)"
            case 1: p.identifier = PositionID(prefix: prefix, marker: UInt8(ascii: "n"), number: Int64(i))
            default: p.identifier = PositionID(prefix: prefix, number: ms)
            }
            var withCache: [UInt8] = [], without: [UInt8] = []
            PositionFormat.jsonl.appendRecord(p, to: &withCache, cache: &cache)
            PositionFormat.jsonl.appendRecord(p, to: &without)
            if withCache != without { mismatches.append(i) }
            // And the record without the cache has the right texts.
            var time: [UInt8] = []
            p.time!.appendISO8601(to: &time)
            let text = String(decoding: without, as: UTF8.self)
            if !text.hasSuffix(#""datum":"# + jsonString(datum.name) + "}\n")
                || !text.contains(#""time":""# + String(decoding: time, as: UTF8.self) + #"""#)
                || !text.contains(#""id":"# + jsonString(p.id) + ",")
                || !text.contains(device.map { #","device":"# + jsonString($0) + "," } ?? #""time""#) {
                badText.append(text)
            }
        }
        #expect(mismatches == [])
        #expect(badText == [])
    }

    private func jsonString(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\t": out += "\\t"
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }
}
