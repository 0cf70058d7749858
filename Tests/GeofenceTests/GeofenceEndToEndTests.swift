import Foundation
import GatewayTesting
import Testing

/// Runs the built `locgate` binary: replay a receiver log → geofence keep_inside → file.
@Suite(.timeLimit(.minutes(3)), .serialized) struct GeofenceEndToEndTests {
    func run(_ config: URL) throws -> (Int32, String) {
        let r = try LocgateBinary.run(["run", config.path])
        return (r.status, r.stderr)
    }

    func lines(_ url: URL) throws -> [[String: Any]] {
        try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    @Test func keepInsidePassesOnlyInsidePositions() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("geofence-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // The drive in this log runs from the north-east corner to the south-west; the fence holds its western half.
        let log = LocgateBinary.packageRoot.appendingPathComponent("Tests/NMEATests/Fixtures/gpsd/bundg_zeus_9.log").path
        let (west, east, south, north) = (5.3084, 5.3110, 52.8470, 52.8510)
        let fences = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"west","name":"West half"},"geometry":{"type":"Polygon","coordinates":[[[\#(west),\#(south)],[\#(east),\#(south)],[\#(east),\#(north)],[\#(west),\#(north)],[\#(west),\#(south)]]]}}]}"#
        try Data(fences.utf8).write(to: dir.appendingPathComponent("fences.geojson"))
        let config = dir.appendingPathComponent("p.json")
        try Data("""
        {"settings":{"stats_interval":false},
         "sources":{"rx":{"type":"file","path":"\(log)","device":"zeus"}},
         "transforms":{"gate":{"type":"geofence","inputs":["rx"],"fences":"fences.geojson","action":"keep_inside","events":["enter","exit"]}},
         "sinks":{"all":{"type":"file","inputs":["rx"],"path":"all.jsonl"},
                  "inside":{"type":"file","inputs":["gate"],"path":"inside.jsonl"}}}
        """.utf8).write(to: config)
        let (status, stderr) = try run(config)
        #expect(status == 0, "\(stderr)")

        let all = try lines(dir.appendingPathComponent("all.jsonl"))
        let inside = try lines(dir.appendingPathComponent("inside.jsonl"))
        // Independent check: a plain rectangle test on the unfiltered output.
        let expected = all.filter { p in
            guard let lat = p["lat"] as? Double, let lon = p["lon"] as? Double else { return false }
            return (west...east).contains(lon) && (south...north).contains(lat)
        }.compactMap { $0["id"] as? String }
        #expect(expected.count > 10 && expected.count < all.count - 10)
        #expect(inside.filter { $0["event"] == nil }.compactMap { $0["id"] as? String } == expected)
        let events = inside.compactMap { $0["event"] as? [String: Any] }
        #expect(events.map { "\($0["type"] ?? "")" } == ["enter"])
        #expect(events.first?["fence"] as? String == "west")
        #expect(stderr.contains("device zeus entered fence west (West half)"))
    }
}
