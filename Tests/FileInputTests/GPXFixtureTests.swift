@testable import FileInput
import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// gpxpy's GPX 1.0 and 1.1 test files (Fixtures/gpx, Apache-2.0, LICENSE-gpxpy.txt; MANIFEST.json
/// says what each holds, counted independently of this reader).
@Suite struct GPXFixtureTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/gpx").path

    struct Expected {
        var trkpt: Int
        /// Track, route and waypoint points: what the reader gives (GPXReader's documented choice).
        var points: Int
        var first: String?
        var last: String?
        var version: String?
    }

    /// The manifest's facts about `name`.
    static func expected(_ name: String) throws -> Expected {
        let manifest = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/MANIFEST.json"))))
        let entry = try #require(manifest["files"]?[name])
        let count = { (key: String) in Int(entry[key]?.numberValue ?? 0) }
        return Expected(trkpt: count("trkpt"), points: count("trkpt") + count("rtept") + count("wpt"), first: entry["trkpt_first_time"]?.stringValue,
                        last: entry["trkpt_last_time"]?.stringValue, version: entry["gpx_version"]?.stringValue)
    }

    /// Every position the file source's reader makes of `name`, with what it logged.
    static func read(_ name: String) throws -> ([Position], RecordingLogHandler, ComponentStats) {
        let log = RecordingLogHandler()
        let stats = ComponentStats(id: "sources.gpx")
        let context = ComponentContext(id: "gpx", kind: .source, logger: log.logger(label: "sources.gpx"), stats: stats, clock: .system)
        var reader = try PositionFileReader(configuration: FileReplayConfiguration(path: "\(directory)/\(name)"), context: context, idPrefix: "g-")
        defer { reader.close() }
        var all: [Position] = []
        while let batch = try reader.next() { all += batch }
        return (all, log, stats)
    }

    @Test(arguments: ["around-visnjan-with-car.gpx", "cerknicko-jezero.gpx", "track-with-empty-segment.gpx", "track-with-less-sec-time.gpx", "track_with_speed.gpx"])
    func realTracksGiveEveryTrackPointWithItsTimes(name: String) throws {
        let expected = try Self.expected(name)
        let (positions, _, _) = try Self.read(name)
        #expect(positions.count == expected.points)
        #expect(positions.allSatisfy { $0.hasCoordinates && $0.mode >= .twoD })
        let first = try #require(expected.first.flatMap { Timestamp(iso8601: $0) })
        let last = try #require(expected.last.flatMap { Timestamp(iso8601: $0) })
        // Waypoints come before the track in these files; the track's own times bound it.
        let times = positions.suffix(expected.trkpt).compactMap(\.time)
        #expect(times.first == first)
        #expect(times.last == last)
        #expect(times.count == expected.trkpt)
        #expect(times == times.sorted(), "times in file order are monotonic")
    }

    @Test func bothVersionsAreCovered() throws {
        #expect(try Self.expected("cerknicko-jezero.gpx").version == "1.0")
        #expect(try Self.expected("around-visnjan-with-car.gpx").version == "1.1")
    }

    @Test func aTimeWithAnOffsetAndMillisecondsIsUTC() throws {
        let (positions, _, _) = try Self.read("track-with-less-sec-time.gpx")
        #expect(positions.map { $0.time?.iso8601 } == ["2015-12-11T14:43:13.000Z", "2015-12-11T14:43:13.994Z"])
    }

    @Test func theInvalidTimeSentinelIsDroppedAndThePositionsKept() throws {
        // Every <time> of Mojstrovka.gpx is 1901-12-13T20:45:52 (INT32_MIN seconds): a sentinel.
        let (positions, _, _) = try Self.read("Mojstrovka.gpx")
        #expect(positions.count == 184)
        #expect(positions.allSatisfy { $0.time == nil && $0.hasCoordinates })
    }

    @Test func pointsWithoutTimesKeepEveryCoordinateToNineDecimals() throws {
        let (positions, _, _) = try Self.read("track-with-extremes.gpx")
        #expect(positions.count == 25)
        #expect(positions.allSatisfy { $0.time == nil })
        // The file's bounding box, point for point (the "extremes" the file is named after).
        #expect(positions.compactMap(\.latitude).min() == 45.479033517)
        #expect(positions.compactMap(\.latitude).max() == 45.485465008)
        #expect(positions.compactMap(\.longitude).min() == 13.507589780)
        #expect(positions.compactMap(\.longitude).max() == 13.520498463)
    }

    @Test func dilutionSpeedAndTheFullSchemaAreRead() throws {
        let (dilution, _, _) = try Self.read("track_with_dilution_errors.gpx")
        let p = try #require(dilution.first)
        #expect(dilution.count == (try Self.expected("track_with_dilution_errors.gpx")).points)
        #expect(dilution.allSatisfy { $0.hdop != nil && $0.vdop != nil && $0.pdop != nil })
        #expect(p.hdop != nil)
        let (speed, _, _) = try Self.read("track_with_speed.gpx")
        #expect(speed.count == 3)
        #expect(speed.allSatisfy { $0.speed != nil })
        let (all, _, _) = try Self.read("gpx1.1_with_all_fields.gpx")
        #expect(all.count == (try Self.expected("gpx1.1_with_all_fields.gpx")).points)
        let q = try #require(all.first { $0.satellites != nil })
        #expect(q.altitude != nil && q.satellites != nil && q.hdop != nil)
        // ele 75.1 + geoidheight 2.0 is the height above the ellipsoid; ageofdgpsdata 9 s.
        #expect(abs((q.detail?.ellipsoidHeight ?? 0) - 77.1) < 1e-9 && q.detail?.correctionAge == 9, "\(String(describing: q.detail))")
        let t = try #require(all.first { $0.altitude == 11.1 })
        #expect(abs((t.detail?.ellipsoidHeight ?? 0) - 24.1) < 1e-9 && t.detail?.correctionAge == 104, "\(String(describing: t.detail))")
        // A point with neither element has no detail.
        #expect(speed.allSatisfy { $0.detail == nil })
    }

    /// A `<sat>` count no receiver reports is left out (written as `uSat`, locgate's own JSON
    /// readers would refuse it); the point itself is kept.
    @Test func aSatelliteCountBeyondTheMaximumIsLeftOut() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gpx = """
            <?xml version="1.0"?><gpx version="1.1" creator="t" xmlns="http://www.topografix.com/GPX/1/1"><trk><trkseg>
            <trkpt lat="46.05" lon="14.5"><time>2024-05-01T10:00:00Z</time><sat>5000</sat></trkpt>
            <trkpt lat="46.06" lon="14.5"><time>2024-05-01T10:00:01Z</time><sat>12</sat></trkpt>
            </trkseg></trk></gpx>
            """
        try gpx.write(toFile: "\(dir)/sats.gpx", atomically: true, encoding: .utf8)
        let context = ComponentContext(id: "gpx", kind: .source, logger: RecordingLogHandler().logger(label: "sources.gpx"),
                                       stats: ComponentStats(id: "sources.gpx"), clock: .system)
        var reader = try PositionFileReader(configuration: FileReplayConfiguration(path: "\(dir)/sats.gpx"), context: context, idPrefix: "g-")
        defer { reader.close() }
        var all: [Position] = []
        while let batch = try reader.next() { all += batch }
        #expect(all.map(\.satellites) == [nil, 12])
    }
}
