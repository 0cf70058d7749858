import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
import Testing

/// JSON Lines and GPX inputs go through the `file` source's reader like NMEA logs.
@Suite struct MapInputTests {
    @Test func aJSONLinesFileGivesOneTrackPerDeviceEachConvertedFromTheDatumItsPositionsCarry() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gcj = ChinaDatums.wgs84ToGCJ02(GeoPoint(latitude: 31.2300, longitude: 121.4700))
        let lines = [
            #"{"time":"2024-05-01T00:00:00.000Z","mode":3,"lat":31.2300,"lon":121.4700,"device":"bus-1"}"#,
            #"{"time":"2024-05-01T00:00:01.000Z","mode":3,"lat":31.2301,"lon":121.4702,"device":"bus-1"}"#,
            // The same place as bus-1's first fix, reported in GCJ-02 by an AMap-based device.
            #"{"time":"2024-05-01T00:00:00.000Z","mode":3,"lat":\#(gcj.latitude),"lon":\#(gcj.longitude),"datum":"gcj02","device":"taxi-9"}"#,
            #"{"time":"2024-05-01T00:00:02.000Z","mode":1,"device":"taxi-9"}"#,
            "not json",
        ]
        let path = try writeTemporary("fleet.jsonl", lines.joined(separator: "\n") + "\n", in: dir)
        let data = try embeddedData(try await mapPage([path]))
        let tracks = data["tracks"]?.arrayValue ?? []
        #expect(tracks.map { $0["name"]?.stringValue } == ["fleet.jsonl · bus-1", "fleet.jsonl · taxi-9"])
        let bus = points(tracks.first?["points"]), taxi = points(tracks.last?["points"])
        #expect(bus.count == 2 && taxi.count == 1)
        #expect(abs(bus[0].0 - taxi[0].0) < 2e-7 && abs(bus[0].1 - taxi[0].1) < 2e-7, "the GCJ-02 fix drawn in WGS84 is on the WGS84 one")
        let notes = data["notes"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(notes.contains("fleet.jsonl: 1 of 4 positions without a fix are not drawn."), "\(notes)")
        #expect(notes.contains("fleet.jsonl: converted from gcj02 to wgs84."), "\(notes)")
    }

    @Test func aGPXTrackIsDrawn() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gpx = """
        <?xml version="1.0"?><gpx version="1.1" creator="test" xmlns="http://www.topografix.com/GPX/1/1"><trk><trkseg>
        <trkpt lat="52.1" lon="5.1"><ele>2</ele><time>2024-05-01T00:00:00Z</time></trkpt>
        <trkpt lat="52.1005" lon="5.1010"><ele>2</ele><time>2024-05-01T00:00:10Z</time></trkpt>
        <trkpt lat="52.1010" lon="5.1030"><ele>2</ele><time>2024-05-01T00:00:20Z</time></trkpt>
        </trkseg></trk></gpx>
        """
        let data = try embeddedData(try await mapPage([try writeTemporary("walk.gpx", gpx, in: dir)]))
        let track = try #require(data["tracks"]?.arrayValue?.first)
        #expect(points(track["points"]).map { [$0.0, $0.1] } == [[52.1, 5.1], [52.1005, 5.101], [52.101, 5.103]])
        #expect(track["start"]?.stringValue == "2024-05-01T00:00:00.000Z" && track["end"]?.stringValue == "2024-05-01T00:00:20.000Z")
    }
}
