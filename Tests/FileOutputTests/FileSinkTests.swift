import FileOutput
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import GatewayCore
import GatewayRuntime
import GatewayTesting
import PositionEncoding
import Testing

/// `count` positions one second apart from `first`, moving north-east; every third has no
/// coordinates when `withGaps` (a receiver without a fix).
func track(_ range: Range<Int>, withGaps: Bool = false) -> [Position] {
    range.map { i in
        let fix = !(withGaps && i % 3 == 2)
        return Position(time: Timestamp(milliseconds: 1_714_521_600_000 + Int64(i) * 1000),
                        latitude: fix ? 31.2 + Double(i) * 1e-4 : nil, longitude: fix ? 121.4 + Double(i) * 1e-4 : nil,
                        altitude: 12.5, speed: 3.25, course: 87.5, mode: fix ? .threeD : .noFix, satellites: 9, hdop: 0.9,
                        source: "rx", device: "van-7", id: "rx-\(i)", attributes: i % 2 == 0 ? ["route": "a,\"b\""] : [:])
    }
}

/// The file sink under test, fed through a real `SinkBuffer` batch by batch (``SinkHarness/start()``),
/// so a test can look at the file after each batch was acknowledged.
typealias Harness = SinkHarness<FileSinkPlugin>

/// The fields of one CSV record (RFC 4180: quoted fields, doubled quotes inside them).
func csvFields(_ line: String) -> [String] {
    var fields: [String] = [], field = "", quoted = false, chars = Array(line), i = 0
    while i < chars.count {
        let c = chars[i]
        if quoted {
            if c == "\"" { if i + 1 < chars.count && chars[i + 1] == "\"" { field.append("\""); i += 1 } else { quoted = false } } else { field.append(c) }
        } else if c == "\"" { quoted = true } else if c == "," { fields.append(field); field = "" } else { field.append(c) }
        i += 1
    }
    fields.append(field)
    return fields
}

func read(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

/// Points of a GPX document, parsed by an XML parser (so the file is well-formed).
func gpxPoints(_ path: String) throws -> Int {
    final class Counter: NSObject, XMLParserDelegate {
        var points = 0
        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            if name == "trkpt" { points += 1 }
        }
    }
    let parser = XMLParser(data: try Data(contentsOf: URL(fileURLWithPath: path)))
    let counter = Counter()
    parser.delegate = counter
    guard parser.parse() else { throw PeerError(description: "\(path) is not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "?")") }
    return counter.points
}

func geojsonFeatures(_ path: String) throws -> [[String: Any]] {
    let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    #expect(doc["type"] as? String == "FeatureCollection")
    return try #require(doc["features"] as? [[String: Any]])
}

@Suite(.timeLimit(.minutes(2))) struct FileSinkTests {
    @Test(arguments: ["jsonl", "csv", "geojson", "gpx"])
    func theFileIsACompleteDocumentAfterEveryBatch(format: String) async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/out.\(format)"
        let run = try Harness(#"{"path":"out.\#(format)"}"#, baseDirectory: dir).start()
        var sent = 0
        for batch in [track(0..<1), track(1..<7, withGaps: true), track(7..<20)] {
            #expect(await run.send(batch))
            sent += batch.count
            let expected = [track(0..<1), track(1..<7, withGaps: true), track(7..<20)].joined().prefix(sent)
            switch format {
            case "jsonl":
                let lines = try read(path).split(separator: "\n")
                #expect(lines.count == sent)
                #expect(lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil })
            case "csv":
                let rows = try read(path).split(separator: "\n")
                #expect(rows.first.map(String.init) == PositionFormat.csv.header.trimmingCharacters(in: .newlines))
                #expect(rows.count == sent + 1)
            case "geojson":
                // A position without coordinates is a Feature with a null geometry (RFC 7946 §3.2).
                let features = try geojsonFeatures(path)
                #expect(features.count == sent)
                #expect(features.filter { $0["geometry"] is NSNull }.count == expected.filter { !$0.hasCoordinates }.count)
            default:
                // GPX has no place for a position without coordinates: those are skipped.
                #expect(try gpxPoints(path) == expected.filter(\.hasCoordinates).count)
            }
        }
        try await run.finish()
    }

    @Test func csvQuotesAttributesWithCommasAndQuotes() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try Harness(#"{"path":"out.csv"}"#, baseDirectory: dir).start()
        #expect(await run.send(track(0..<1)))
        try await run.finish()
        let rows = try read("\(dir)/out.csv").split(separator: "\n").map { csvFields(String($0)) }
        #expect(rows.count == 2)
        #expect(rows[0] == PositionFormat.csvColumns)
        #expect(rows[1].count == rows[0].count, "\(rows[1])")
        let record = Dictionary(uniqueKeysWithValues: zip(rows[0], rows[1]))
        #expect(record["time"]?.hasPrefix("2024-05-01T00:00:00") == true)
        #expect(record["id"] == "rx-0")
        // Every other attribute is one JSON object in one field, quoted for CSV.
        let attributes = try #require(try JSONSerialization.jsonObject(with: Data((record["attributes"] ?? "").utf8)) as? [String: String])
        #expect(attributes == ["route": #"a,"b""#])
    }

    @Test(arguments: ["geojson", "gpx", "jsonl"])
    func appendContinuesTheDocumentOfAnEarlierRun(format: String) async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for range in [0..<5, 5..<12] {
            let run = try Harness(#"{"path":"out.\#(format)"}"#, baseDirectory: dir).start()
            #expect(await run.send(track(range)))
            try await run.finish()
        }
        let path = "\(dir)/out.\(format)"
        switch format {
        case "geojson": #expect(try geojsonFeatures(path).count == 12)
        case "gpx": #expect(try gpxPoints(path) == 12)
        default: #expect(try read(path).split(separator: "\n").count == 12)
        }
    }

    @Test func truncateStartsEmpty() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for range in [0..<5, 5..<8] {
            let run = try Harness(#"{"path":"out.geojson","mode":"truncate"}"#, baseDirectory: dir).start()
            #expect(await run.send(track(range)))
            try await run.finish()
        }
        let ids = try geojsonFeatures("\(dir)/out.geojson").compactMap { ($0["properties"] as? [String: Any])?["id"] as? String }
        #expect(ids == ["rx-5", "rx-6", "rx-7"])
    }

    @Test func aJSONLinesFileCutMidLineIsEndedBeforeAppending() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try #"{"class":"TPV","id":"a-1"}"#.appending("\n").appending(#"{"class":"TPV","id":"a-2","la"#)
            .write(toFile: "\(dir)/out.jsonl", atomically: true, encoding: .utf8)
        let run = try Harness(#"{"path":"out.jsonl"}"#, baseDirectory: dir).start()
        #expect(await run.send(track(0..<2)))
        try await run.finish()
        let lines = try read("\(dir)/out.jsonl").split(separator: "\n")
        #expect(lines.count == 4)
        #expect(lines[1] == #"{"class":"TPV","id":"a-2","la"#)
        #expect(lines.dropFirst(2).allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil })
        #expect(!run.log.entries(containing: "ended in the middle of a line").isEmpty)
    }

    @Test func anIncompleteDocumentIsMovedAsideNotCorrupted() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cut = #"{"type":"FeatureCollection","features":[{"type":"Feature""#
        try cut.write(toFile: "\(dir)/out.geojson", atomically: true, encoding: .utf8)
        let run = try Harness(#"{"path":"out.geojson"}"#, baseDirectory: dir).start()
        #expect(await run.send(track(0..<3)))
        try await run.finish()
        #expect(try geojsonFeatures("\(dir)/out.geojson").count == 3)
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix("out.geojson.incomplete-") }
        #expect(aside.count == 1)
        #expect(try aside.first.map { try read("\(dir)/\($0)") } == cut, "the old bytes are kept as they were")
    }

    @Test func rotationKeepsCompleteFilesAndLosesNoRecord() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try Harness(#"{"path":"out.geojson","rotate_bytes":4000,"keep_files":50}"#, baseDirectory: dir).start()
        for start in stride(from: 0, to: 60, by: 4) { #expect(await run.send(track(start..<start + 4))) }
        try await run.finish()
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix("out.geojson") }
        #expect(files.count > 3, "\(files)")
        var ids: [String] = []
        for f in files {
            let size = try #require(try FileManager.default.attributesOfItem(atPath: "\(dir)/\(f)")[.size] as? Int)
            #expect(size <= 4000, "\(f) is \(size) bytes")
            ids += try geojsonFeatures("\(dir)/\(f)").compactMap { ($0["properties"] as? [String: Any])?["id"] as? String }
        }
        #expect(Set(ids) == Set((0..<60).map { "rx-\($0)" }))
        #expect(ids.count == 60)
    }

    @Test func rotationKeepsOnlyKeepFilesAndZeroDeletes() async throws {
        for keep in [2, 0] {
            let dir = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let run = try Harness(#"{"path":"out.jsonl","rotate_bytes":1500,"keep_files":\#(keep)}"#, baseDirectory: dir).start()
            for start in stride(from: 0, to: 40, by: 2) { #expect(await run.send(track(start..<start + 2))) }
            try await run.finish()
            let files = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
            #expect(files == ["out.jsonl"] + (0..<keep).map { "out.jsonl.\($0 + 1)" })
            // The newest records are in the current file, the oldest were rotated away.
            let last = try #require(try read("\(dir)/out.jsonl").split(separator: "\n").last)
            #expect(last.contains(#""rx-39""#))
        }
    }

    @Test func aMissingDirectoryFailsWithThePathAndTheReason() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try Harness(#"{"path":"nowhere/out.jsonl"}"#, baseDirectory: dir).start()
        await #expect(throws: (any Error).self) { try await run.finish() }
        do { try await run.finish() } catch {
            #expect("\(error)".contains("\(dir)/nowhere/out.jsonl"))
            #expect("\(error)".contains("No such file or directory"))
        }
    }
}
