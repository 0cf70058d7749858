import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
import Testing

/// Every layer is drawn in the display datum, so a BD-09 fence and WGS84 fixes line up
/// (or, when the fence's datum is declared wrong, visibly do not).
@Suite struct MapDatumTests {
    /// A box in Shanghai holding the last four of the log's five fixes (the first is south of it).
    let box = [31.2481, 121.5872, 31.2484, 121.5876]

    @Test func aBD09FenceAndAWGS84TrackInBD09LineUpWithTheSameFenceGivenInWGS84() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let wgs = try writeTemporary("wgs84.geojson", fenceCollection(rectangles: [("park", box)]), in: dir)
        let bd = try writeTemporary("bd09.geojson", convertedRectangle(id: "park", box: box, to: .bd09), in: dir)

        let fromWGS = try embeddedData(try await mapPage(["--datum", "bd09", "--fences", wgs, shanghaiLog]))
        let fromBD = try embeddedData(try await mapPage(["--datum", "bd09", "--fence-datum", "bd09", "--fences", bd, shanghaiLog]))
        let plain = try embeddedData(try await mapPage([shanghaiLog]))

        // The fence: the same vertices within 1e-7° (1 cm), whichever datum it was written in.
        let ringWGS = points(fromWGS["fences"]?.arrayValue?.first?["polygons"]?.arrayValue?.first?.arrayValue?.first)
        let ringBD = points(fromBD["fences"]?.arrayValue?.first?["polygons"]?.arrayValue?.first?.arrayValue?.first)
        #expect(ringWGS.count == 5 && ringBD.count == 5)
        for (a, b) in zip(ringWGS, ringBD) {
            #expect(abs(a.0 - b.0) < 2e-7 && abs(a.1 - b.1) < 2e-7, "fence vertex \(a) drawn from WGS84, \(b) from BD-09")
        }
        // And it is in BD-09: the first corner is the WGS84 corner shifted by Baidu's formula (hundreds of metres).
        let corner = ChinaDatums.wgs84ToBD09(GeoPoint(latitude: box[0], longitude: box[1]))
        #expect(abs(ringWGS[0].0 - corner.latitude) < 2e-7 && abs(ringWGS[0].1 - corner.longitude) < 2e-7)
        #expect(Geodesic.distance(from: GeoPoint(latitude: box[0], longitude: box[1]), to: corner) > 400)

        // The track: each WGS84 fix converted into BD-09.
        let trackWGS = points(plain["tracks"]?.arrayValue?.first?["points"])
        let trackBD = points(fromBD["tracks"]?.arrayValue?.first?["points"])
        #expect(trackWGS.count == 5 && trackBD.count == 5)
        for (w, b) in zip(trackWGS, trackBD) {
            let expected = ChinaDatums.wgs84ToBD09(GeoPoint(latitude: w.0, longitude: w.1))
            #expect(abs(b.0 - expected.latitude) < 2e-7 && abs(b.1 - expected.longitude) < 2e-7)
        }

        // Events: the geofence transform sees the same geometry both ways, so it enters at the same fix.
        let eventsWGS = fromWGS["events"]?.arrayValue ?? []
        let eventsBD = fromBD["events"]?.arrayValue ?? []
        #expect(eventsWGS.map { $0["kind"]?.stringValue } == ["enter"])
        #expect(eventsWGS == eventsBD)
        #expect(points(JSONValue.array(eventsBD.compactMap { $0["point"] })).first.map { $0 == trackBD[1] } == true,
                "the enter is marked at the second fix, the first inside the fence")
    }

    @Test func aBD09FenceDeclaredAsWGS84IsDrawnHundredsOfMetresAwayAndNeverEntered() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bd = try writeTemporary("bd09.geojson", convertedRectangle(id: "park", box: box, to: .bd09), in: dir)
        // The classic mistake: Baidu coordinates tested as if they were WGS84.
        let data = try embeddedData(try await mapPage(["--fences", bd, shanghaiLog]))
        let ring = points(data["fences"]?.arrayValue?.first?["polygons"]?.arrayValue?.first?.arrayValue?.first)
        let track = points(data["tracks"]?.arrayValue?.first?["points"])
        let last = track.last, first = ring.first
        let fix = try #require(last)
        let corner = try #require(first)
        #expect(Geodesic.distance(from: GeoPoint(latitude: fix.0, longitude: fix.1), to: GeoPoint(latitude: corner.0, longitude: corner.1)) > 400)
        #expect(data["events"]?.arrayValue?.isEmpty == true)
        #expect(data["fences"]?.arrayValue?.first?["sourceDatum"]?.stringValue == "wgs84")
    }

    @Test func aGCJ02DisplayConvertsTheTrackAndSaysSo() async throws {
        let data = try embeddedData(try await mapPage(["--datum", "gcj02", shanghaiLog]))
        let plain = try embeddedData(try await mapPage([shanghaiLog]))
        let plainFirst = points(plain["tracks"]?.arrayValue?.first?["points"]).first
        let convertedFirst = points(data["tracks"]?.arrayValue?.first?["points"]).first
        let w = try #require(plainFirst)
        let g = try #require(convertedFirst)
        let expected = ChinaDatums.wgs84ToGCJ02(GeoPoint(latitude: w.0, longitude: w.1))
        #expect(abs(g.0 - expected.latitude) < 2e-7 && abs(g.1 - expected.longitude) < 2e-7)
        #expect(data["datum"]?.stringValue == "gcj02")
        #expect(data["notes"]?.arrayValue?.contains { $0.stringValue?.contains("converted from wgs84 to gcj02") == true } == true)
    }
}
