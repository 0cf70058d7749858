import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// `locgate map` as a user runs it: bad input exits 2 with the file and the reason and writes
/// no page; a good page loads nothing from the network.
@Suite(.timeLimit(.minutes(2)))
struct MapCommandTests {
    func expectRefused(_ arguments: [String], saying message: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try LocgateBinary.run(["map"] + arguments)
        #expect(result.status == 2, "exit status for \(arguments)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(message), "stderr: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, "no page on a refusal", sourceLocation: sourceLocation)
    }

    @Test func anEmptyFileAFileWithoutAFixAndAMissingFileAreRefusedByName() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let empty = try writeTemporary("empty.nmea", "", in: dir)
        try expectRefused([empty], saying: "\(empty): no positions (an empty file, or nothing in it reads as nmea)")
        // A real receiver log from gpsd's suite whose twelve epochs never got a fix.
        let noFix = gpsdFixture("GPSmap-76S.log")
        try expectRefused([noFix], saying: "\(noFix): 12 position(s), none with a fix")
        // One bad input among good ones still refuses: the page would silently lack a track.
        try expectRefused([boatLog, dir + "/missing.nmea"], saying: "\(dir)/missing.nmea: cannot open for reading: No such file or directory")
        try expectRefused([dir], saying: "\(dir): cannot replay: Is a directory")
        let emptyJSONL = try writeTemporary("bad.jsonl", "not json\n", in: dir)
        try expectRefused([emptyJSONL], saying: "no positions (an empty file, or nothing in it reads as jsonl)")
    }

    @Test func fenceFileErrorsNameTheFileAndTheReason() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try expectRefused(["--fences", dir + "/none.geojson", boatLog], saying: "\(dir)/none.geojson: no such file")
        let broken = try writeTemporary("broken.geojson", #"{"type": "FeatureCollection", "features": ["#, in: dir)
        try expectRefused(["--fences", broken, boatLog], saying: "\(broken): not valid JSON: line 1")
        let badGeometry = try writeTemporary("bad.geojson", #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"a"},"geometry":{"type":"Polygon","coordinates":[[[5.3,52.8],[5.31,52.8]]]}}]}"#, in: dir)
        try expectRefused(["--fences", badGeometry, boatLog], saying: "\(badGeometry): features[0].geometry.coordinates:")
        let circle = try writeTemporary("circle.geojson", #"{"type":"Feature","properties":{"id":"c"},"geometry":{"type":"Point","coordinates":[5.3,52.8]}}"#, in: dir)
        try expectRefused(["--fences", circle, boatLog], saying: "\(circle): properties.radius: a Point fence needs a \"radius\" property in metres")
    }

    @Test func badOptionsAreRefused() throws {
        try expectRefused([], saying: "nothing to draw")
        try expectRefused(["--datum", "utm", boatLog], saying: "--datum: expected wgs84, gcj02 or bd09, got \"utm\"")
        try expectRefused(["--max-points", "1", boatLog], saying: "--max-points: expected a whole number from 2")
        try expectRefused(["--fences"], saying: "--fences needs a value")
        try expectRefused(["--tiles", "tiles.example", boatLog], saying: "--tiles: expected a URL template with {z}, {x} and {y}")
        try expectRefused([boatLog, "--fence-datum", "bd09"], saying: "--fence-datum applies to the --fences files after it")
        try expectRefused(["--colour", "red", boatLog], saying: "unknown option --colour")
    }

    func urls(in html: String) -> [String] { httpURLs(in: html) }

    @Test func withoutTilesThePageReferencesNoURL() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fences = try writeTemporary("f.geojson", fenceCollection(rectangles: [("channel", [52.8486, 5.3090, 52.8494, 5.3125])]), in: dir)
        let result = try LocgateBinary.run(["map", "--fences", fences, boatLog])
        #expect(result.status == 0, "\(result.stderr)")
        let html = result.stdout
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        // Only two strings in Leaflet's own code look like URLs, and neither is loaded: the SVG
        // namespace name, and the attribution link the page turns off.
        #expect(Set(urls(in: html)).isSubset(of: leafletURLs), "\(Set(urls(in: html)))")
        // Nothing is loaded from anywhere: no src or href attribute, no CSS url() but data: URIs.
        #expect(html.range(of: #"\ssrc\s*="#, options: .regularExpression) == nil)
        #expect(html.range(of: #"<link\b"#, options: .regularExpression) == nil)
        #expect(html.range(of: #"url\((?!data:|#default#VML)"#, options: .regularExpression) == nil)
        #expect(!html.contains("sourceMappingURL"))
        // Leaflet itself is inlined.
        #expect(html.contains("leaflet-container"))

        let tiled = try LocgateBinary.run(["map", "--tiles", "https://tiles.example.org/{z}/{x}/{y}.png", "--tiles-attribution", "© Example", boatLog])
        #expect(tiled.status == 0)
        #expect(urls(in: tiled.stdout).contains("https://tiles.example.org/{z}/{x}/{y}.png"))
    }
}
