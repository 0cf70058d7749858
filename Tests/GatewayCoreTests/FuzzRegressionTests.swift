import GatewayCore
import Testing

/// Inputs on which fuzzing (`make fuzz`, Fuzz/README.md) found a defect, kept so it stays fixed
/// (those of the position object, PositionJSON, are in PositionEncodingTests).
@Suite struct FuzzRegressionTests {
    /// `{"k0":0,"k1":1,…}` with `count` members, then `extra` (already a JSON member list).
    static func object(members count: Int, then extra: String = "") -> String {
        let members = (0..<count).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        return "{" + members + (extra.isEmpty ? "" : "," + extra) + "}"
    }

    static func parse(_ text: String, duplicateKeys: JSONDuplicateKeys = .lastWins) -> Result<JSONValue, JSONParseError> {
        do throws(JSONParseError) {
            return .success(try JSONValue.parse(Array(text.utf8), duplicateKeys: duplicateKeys))
        } catch {
            return .failure(error)
        }
    }

    /// Found reviewing what one input of the Fuzz/JSON target can cost, confirmed by running the
    /// target on it (62 s for 56 KB): an object of 4,096 members (the most the parser allows)
    /// took a search of its members per member, 8 million key comparisons, about two seconds in
    /// a debug build. A 1 MiB NATS message or JSON line holds two dozen of them, so
    /// one publisher could hold the pipeline's thread for many seconds per message. Big objects
    /// now find their keys through an index. The time limit is a hang guard about thirty times
    /// above what the fixed parser takes here, not a performance bound: with a search per member
    /// this test takes over two minutes.
    @Test(.timeLimit(.minutes(1)))
    func manyObjectsOfTheLargestSizeParseWithoutASearchPerMember() throws {
        let line = "[" + Array(repeating: Self.object(members: 4096), count: 64).joined(separator: ",") + "]"
        let value = try Self.parse(line).get()
        #expect(value.arrayValue?.count == 64)
        #expect(value.arrayValue?.last?.objectValue?.count == 4096)
        #expect(value.arrayValue?.last?["k4095"] == .number(4095))
        // What sorts the keys of a configuration component builds big objects the same way.
        #expect(value.sortingKeys.arrayValue?.first?.objectValue?.count == 4096)
    }

    /// Past the size where keys go through an index, duplicates mean what they meant with a
    /// search: the last value wins at the first key's place, or the second key is the error.
    @Test(arguments: [4, 16, 17, 100, 4095])
    func duplicateKeysMeanTheSameAtEverySize(members: Int) throws {
        let text = Self.object(members: members, then: #""k2":"last""#)
        let object = try #require(try Self.parse(text).get().objectValue)
        #expect(object.count == members)
        #expect(object.keys.prefix(4) == ["k0", "k1", "k2", "k3"].prefix(min(4, members)))
        #expect(object["k2"] == .string("last"))
        #expect(object.members[2].value == .string("last"))

        guard case .failure(let error) = Self.parse(text, duplicateKeys: .reject) else {
            Issue.record("a duplicate key was accepted")
            return
        }
        #expect(error.message == #"duplicate key "k2""#)
        #expect(error.offset == text.utf8.count - #""k2":"last"}"#.utf8.count)
    }

    /// Keys are compared as Swift strings (canonical equivalence), in the search and in the index alike.
    @Test(arguments: [3, 40])
    func canonicallyEquivalentKeysAreOneKeyAtEverySize(members: Int) throws {
        let text = Self.object(members: members, then: "\"caf\u{E9}\":1,\"cafe\u{301}\":2")
        let object = try #require(try Self.parse(text).get().objectValue)
        #expect(object.count == members + 1)
        #expect(object["caf\u{E9}"] == .number(2))
    }

    /// `JSONObject(_:)` builds long lists through an index too, with the same meaning.
    @Test func anObjectBuiltFromALongListKeepsTheFirstPlaceAndTheLastValue() {
        var members = (0..<100).map { ("k\($0)", JSONValue.number(Double($0))) }
        members.append(("k7", .string("last")))
        let object = JSONObject(members)
        #expect(object.count == 100)
        #expect(object.members[7].key == "k7")
        #expect(object.members[7].value == .string("last"))
    }

    /// Fuzz/Configuration crash-3a522602 (the input as it was, a plugin sample with `"sinks"`
    /// mutated to `""`): the unknown top-level key `""` was reported at the path `""`, so
    /// `locgate validate` printed ": unknown top-level key" without saying which.
    static let emptyTopLevelKey = #"""
        {
         "sources": { "in": { "type": "file", "path": "track.nmea" } },
         "transforms": {
          "t": {
           "type": "geofence", "inputs": [ "in" ], "fences": "depots.geojson", "fence_datum": "wgs83",
           "action": "oeep_inside", "events": [ "enter", "exit", "dwell" ], "min_inside": 2,
           "min_outside": "10s", "border_m": 15, "loiter": "5m", "max_horizontal_error": 50
          }
         },
         "": { "out": { "type": "stdout", "inputs": [ "t" ] } }
        }
        """#

    @Test func everyProblemOfAConfigurationWithAnEmptyKeyNamesAPath() {
        do {
            _ = try PipelineConfiguration.load(json: Array(Self.emptyTopLevelKey.utf8), registry: PluginRegistry())
            Issue.record("loaded")
        } catch {
            #expect(error.problems.allSatisfy { !$0.path.isEmpty }, "\(error)")
            #expect(error.problems.contains { $0.path == #"[""]"# && $0.message.hasPrefix("unknown top-level key") }, "\(error)")
        }
    }

    /// Unknown keys a dotted path cannot show are reported in brackets, JSON-escaped; plain
    /// ones as before.
    @Test(arguments: [
        ("colour", "sources.gps.colour"), ("", #"sources.gps[""]"#), ("a.b", #"sources.gps["a.b"]"#),
        ("two words", #"sources.gps["two words"]"#), ("tab\t", #"sources.gps["tab\t"]"#), ("quote\"", #"sources.gps["quote\""]"#),
        ("Empfänger", "sources.gps.Empfänger"),
    ])
    func unknownKeysAreReportedAtAPathThatShowsThem(key: String, path: String) {
        let diagnostics = ConfigurationDiagnostics()
        let reader = OptionReader(object: JSONObject([(key, .number(1))]), path: "sources.gps", diagnostics: diagnostics)
        reader.finish()
        #expect(diagnostics.problems.map(\.path) == [path])
    }
}
