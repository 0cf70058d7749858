import Foundation
import GatewayCore
import GatewayTesting
import PositionEncoding
import Testing

/// Every example of locgate's output in a README is the output of a real run: a block
/// after `<!-- output: NAME -->` must equal what scenario NAME prints, and output JSON anywhere
/// else in a README fails the check. `LOCGATE_UPDATE_DOCS=1` rewrites the blocks instead.
@Suite(.serialized)
struct ReadmeExamplesTests {
    static let root = LocgateBinary.packageRoot.path

    /// The READMEs: the top-level one and every plugin's.
    static var documents: [String] {
        let plugins = (try? FileManager.default.contentsOfDirectory(atPath: "\(root)/Plugins")) ?? []
        return ["README.md"] + plugins.sorted().map { "Plugins/\($0)/README.md" }
    }

    /// A track across the "North depot" fence: outside, inside twice, outside.
    static let track = [
        #"{"time":"2026-03-01T08:00:00.000Z","lat":31.2290,"lon":121.4690,"mode":3,"speed":4.2,"id":"van-7-1"}"#,
        #"{"time":"2026-03-01T08:00:20.000Z","lat":31.2310,"lon":121.4710,"mode":3,"speed":3.9,"id":"van-7-2"}"#,
        #"{"time":"2026-03-01T08:00:40.000Z","lat":31.2315,"lon":121.4720,"mode":3,"speed":0.4,"id":"van-7-3"}"#,
        #"{"time":"2026-03-01T08:01:00.000Z","lat":31.2340,"lon":121.4760,"mode":3,"speed":5.1,"id":"van-7-4"}"#,
    ].joined(separator: "\n") + "\n"
    /// A van for the motion transform: parked 80 s with the engine running, 1 km east at
    /// 45 km/h, parked again, the ignition off 70 s later; a fix every 10 s.
    static let van = (0..<27).map { i in
        let driven = min(max(i - 8, 0), 8), time = "2026-03-01T08:0\(i * 10 / 60):\(i * 10 % 60 == 0 ? "00" : String(i * 10 % 60)).000Z"
        let lon = String(format: "%.4f", 121.469 + 0.0013 * Double(driven))
        return #"{"time":"\#(time)","lat":31.2290,"lon":\#(lon),"mode":3,"speed":\#(driven > 0 && i <= 16 ? "12.5" : "0"),"device":"van-7","id":"van-7-\#(i + 1)","attributes":{"ignition":"\#(i < 24)"}}"#
    }.joined(separator: "\n") + "\n"
    static let fences = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"depot-n","name":"North depot"},"geometry":{"type":"Polygon","coordinates":[[[121.470,31.230],[121.474,31.230],[121.474,31.233],[121.470,31.233],[121.470,31.230]]]}}]}"#

    /// Runs `locgate run` on `config` in a fresh directory holding the track, the van, the fences
    /// and gpsd's RTK log; returns the file `output` (or stdout when nil).
    static func run(_ config: String, output: String? = nil) throws -> String {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data(track.utf8).write(to: URL(fileURLWithPath: "\(dir)/track.jsonl"))
        try Data(fences.utf8).write(to: URL(fileURLWithPath: "\(dir)/depots.geojson"))
        try Data(van.utf8).write(to: URL(fileURLWithPath: "\(dir)/van.jsonl"))
        try FileManager.default.copyItem(atPath: gpsdFixture("nmea-rtk.log").path, toPath: "\(dir)/drive.nmea")
        try Data(config.utf8).write(to: URL(fileURLWithPath: "\(dir)/pipeline.json"))
        let r = try LocgateBinary.run(["run", "\(dir)/pipeline.json", "--log-level", "warning"])
        guard r.status == 0 else { throw PeerError(description: "run failed: \(r.stderr)") }
        guard let output else { return r.stdout }
        return try String(contentsOfFile: "\(dir)/\(output)", encoding: .utf8)
    }

    static let geofence = #""fence":{"type":"geofence","inputs":["tag"],"fences":"depots.geojson","action":"annotate","events":["enter","exit"]}"#
    static let tag = #""tag":{"type":"set","inputs":["van"],"attributes":{"driver":"li"}}"#

    /// What each marked block shows.
    static let scenarios: [String: @Sendable () throws -> String] = [
        // The first position of gpsd's RTK log, as the stdout and file sinks write it.
        "position-jsonl": {
            let out = try run(#"{"sources":{"log":{"type":"file","path":"drive.nmea","device":"van-7"}},"sinks":{"o":{"type":"stdout","inputs":["log"]}}}"#)
            return String(out.split(separator: "\n").first ?? "")
        },
        "geofence-events": {
            try run(#"{"sources":{"van":{"type":"file","path":"track.jsonl"}},"transforms":{\#(tag),\#(geofence)},"sinks":{"o":{"type":"stdout","inputs":["fence"]}}}"#)
                .trimmingCharacters(in: .newlines)
        },
        // The motion transform's events for the van (Plugins/Motion/README.md).
        "motion-events": {
            let motion = #""motion":{"type":"motion","inputs":["van"],"stop_radius_m":30,"min_stop_duration":"60s","min_trip_distance_m":300,"speed_limit_kmh":40,"idle_after":"60s"}"#
            return try run(#"{"sources":{"van":{"type":"file","path":"van.jsonl"}},"transforms":{\#(motion)},"sinks":{"o":{"type":"stdout","inputs":["motion"]}}}"#)
                .split(separator: "\n").filter { $0.contains(#""event":{"#) }.joined(separator: "\n")
        },
        "file-csv": {
            try run(#"{"sources":{"van":{"type":"file","path":"track.jsonl"}},"transforms":{\#(tag),\#(geofence)},"sinks":{"o":{"type":"file","inputs":["fence"],"path":"track.csv"}}}"#, output: "track.csv")
                .trimmingCharacters(in: .newlines)
        },
    ]

    struct Block {
        var document: String
        var name: String
        var body: Range<String.Index>
        var text: String
    }

    static func blocks(in document: String, text: String) -> [Block] {
        text.matches(of: #/<!-- output: ([a-z0-9-]+)[^>]*-->\n```[a-z]*\n/#).compactMap { m in
            guard let end = text[m.range.upperBound...].range(of: "```") else { return nil }
            let body = m.range.upperBound..<end.lowerBound
            return Block(document: document, name: String(m.output.1), body: body, text: String(text[body]))
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func everyMarkedOutputBlockIsWhatARealRunPrints() throws {
        let update = ProcessInfo.processInfo.environment["LOCGATE_UPDATE_DOCS"] == "1"
        var seen = Set<String>()
        for document in Self.documents {
            let path = "\(Self.root)/\(document)"
            guard var text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            for block in Self.blocks(in: document, text: text).reversed() {
                let scenario = try #require(Self.scenarios[block.name], "\(document): no scenario \"\(block.name)\"")
                seen.insert(block.name)
                let actual = try scenario() + "\n"
                if update { text.replaceSubrange(block.body, with: actual) } else {
                    #expect(block.text == actual, "\(document), output \(block.name): the docs show\n\(block.text)\na run prints\n\(actual)")
                }
            }
            if update { try text.write(toFile: path, atomically: true, encoding: .utf8) }
        }
        #expect(seen == Set(Self.scenarios.keys), "scenarios without a block in the docs: \(Set(Self.scenarios.keys).subtracting(seen))")
    }

    /// Output JSON outside a checked block could drift again.
    @Test func noOutputJSONAppearsOutsideACheckedBlock() throws {
        for document in Self.documents {
            guard var text = try? String(contentsOfFile: "\(Self.root)/\(document)", encoding: .utf8) else { continue }
            for block in Self.blocks(in: document, text: text).reversed() { text.removeSubrange(block.body) }
            for needle in [#""class":"TPV""#, #""event":{"#] {
                #expect(!text.contains(needle), "\(document) shows output (\(needle)) outside an <!-- output: … --> block")
            }
        }
    }

    @Test func theJSONLinesSchemaTablesListEveryField() throws {
        let table = (["| field | meaning |", "|---|---|"] + PositionJSON.fields.map { "| `\($0.name)` | \($0.meaning.replacingOccurrences(of: "|", with: "\\|")) |" })
            .joined(separator: "\n")
        for document in ["Plugins/FileInput/README.md", "Plugins/ExecInput/README.md"] {
            let text = try String(contentsOfFile: "\(Self.root)/\(document)", encoding: .utf8)
            #expect(text.contains("<!-- generated: PositionJSON.fields -->\n" + table + "\n"), "\(document) should hold:\n\(table)")
        }
    }
}
