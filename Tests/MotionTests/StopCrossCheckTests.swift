import FileInput
import Foundation
import GatewayCore
import GatewayTesting
@testable import Motion
import Testing

/// Stops in recorded tracks (gpxpy's GPX files: a car near Višnjan, a walk and ride around
/// Cerknica lake) against an independent implementation: MovingPandas' TrajectoryStopDetector,
/// run once by Support/stop_crosscheck.py, its output committed as
/// Fixtures/movingpandas-stops.json with the library's version and the command.
///
/// MovingPandas calls a stop fixes that stay within a diameter for a duration; the motion
/// transform runs with a radius of half that diameter, the same minimal stop, and no minimal trip
/// (every departure ends a stop: this compares stop detection, not trip filtering).
@Suite struct StopCrossCheckTests {
    static let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let gpx = here.appendingPathComponent("../FileInputTests/Fixtures/gpx").standardized.path

    struct Stop: CustomStringConvertible {
        var start: Timestamp
        var end: Timestamp
        var seconds: Double { Double(end.milliseconds - start.milliseconds) / 1000 }
        var description: String { "\(start.iso8601.dropFirst(11).prefix(8))–\(end.iso8601.dropFirst(11).prefix(8))" }
    }

    struct Run {
        var file: String
        var diameter: Double
        var minimum: Double
        var stops: [Stop]
    }

    static func reference() throws -> (library: String, runs: [Run]) {
        let json = try JSONValue.parse(Array(try Data(contentsOf: here.appendingPathComponent("Fixtures/movingpandas-stops.json"))))
        let runs = try (json["runs"]?.arrayValue ?? []).map { r in
            Run(file: try #require(r["file"]?.stringValue), diameter: try #require(r["max_diameter_m"]?.numberValue),
                minimum: try #require(r["min_duration_s"]?.numberValue),
                stops: try (r["stops"]?.arrayValue ?? []).map { s in
                    Stop(start: try #require(s["start"]?.stringValue.flatMap(Timestamp.init(iso8601:))),
                         end: try #require(s["end"]?.stringValue.flatMap(Timestamp.init(iso8601:))))
                })
        }
        return (json["library"]?.stringValue ?? "", runs)
    }

    /// The track points of a GPX file as the file source reads them.
    static func read(_ file: String) throws -> [Position] {
        let context = ComponentContext(id: "gpx", kind: .source, logger: Logger(label: "t", handler: SilentLogHandler()), stats: ComponentStats(id: "gpx"))
        var reader = try PositionFileReader(configuration: FileReplayConfiguration(path: "\(gpx)/\(file)"), context: context, idPrefix: "g-")
        defer { reader.close() }
        var all: [Position] = []
        while let batch = try reader.next() { all += batch }
        return all.filter { $0.time != nil }
    }

    /// The motion transform's stops: from each `stop_start` to its `stop_end`, or to the last fix.
    static func motionStops(_ positions: [Position], radius: Double, minimum: Double) throws -> [Stop] {
        let json = #"{"stop_radius_m": \#(radius), "min_stop_duration": \#(minimum), "min_trip_distance_m": 0, "min_trip_duration": 0}"#
        var stops: [Stop] = []
        for e in Motion.events(try Motion.run(json, positions)) {
            switch e.event?.kind {
            case .stopStart?: stops.append(Stop(start: e.time!, end: positions.last!.time!))
            case .stopEnd?: if !stops.isEmpty { stops[stops.count - 1].end = e.time! }
            default: break
            }
        }
        return stops
    }

    /// The stops of `a` at least `minimum` long that no stop of `b` covers half of (or that cover
    /// less than half of it).
    static func unmatched(_ a: [Stop], in b: [Stop], minimum: Double) -> [Stop] {
        a.filter { s in
            s.seconds >= minimum && !b.contains { o in
                let overlap = Double(min(s.end.milliseconds, o.end.milliseconds) - max(s.start.milliseconds, o.start.milliseconds)) / 1000
                return overlap >= 0.5 * min(s.seconds, o.seconds)
            }
        }
    }

    /// Every stop at least twice the minimal duration, in every run, is found by both; with the
    /// transform's defaults (a 100 m radius: 200 m across, 5 min) and on the car's track, every
    /// stop at least the minimal duration is. Below twice the minimum, on the walk, MovingPandas
    /// finds a few stops of 1–1.5 times the minimum that the transform does not: its window of
    /// the last `min_duration` cuts slow walking into back-to-back stops (14:23:59–14:30:27 and
    /// 14:30:35–14:41:55 at 200 m), where the transform's stop must stay within the radius of
    /// the centre of its fixes from its first slow fix on.
    @Test func stopsAgreeWithMovingPandas() throws {
        let (library, runs) = try Self.reference()
        #expect(library.hasPrefix("movingpandas 0.23.0"))
        #expect(runs.count == 8)
        var compared = 0
        var shifts: [Double] = []
        for run in runs {
            let positions = try Self.read(run.file)
            let mine = try Self.motionStops(positions, radius: run.diameter / 2, minimum: run.minimum)
            let strict = run.file.hasPrefix("around-visnjan") || (run.diameter == 200 && run.minimum == 300)
            let minimum = strict ? run.minimum : 2 * run.minimum
            let context = "\(run.file), \(run.diameter) m across, \(run.minimum) s: MovingPandas \(run.stops), motion \(mine)"
            #expect(Self.unmatched(run.stops, in: mine, minimum: minimum).isEmpty, "\(context)")
            #expect(Self.unmatched(mine, in: run.stops, minimum: minimum).isEmpty, "\(context)")
            for s in run.stops where s.seconds >= minimum {
                compared += 1
                if let m = mine.min(by: { abs($0.start.milliseconds - s.start.milliseconds) < abs($1.start.milliseconds - s.start.milliseconds) }) {
                    shifts += [abs(Double(m.start.milliseconds - s.start.milliseconds)), abs(Double(m.end.milliseconds - s.end.milliseconds))].map { $0 / 1000 }
                }
            }
        }
        #expect(compared >= 15)
        shifts.sort()
        print("stops compared with \(library): \(compared); start and end differences median \(shifts[shifts.count / 2]) s, largest \(shifts.last ?? 0) s")
    }

    /// The comparison fails when the transform's stops are wrong: shifted by ten minutes, none matches.
    @Test func theComparisonSeesAWrongStop() throws {
        let stops = [Stop(start: Timestamp(milliseconds: 0), end: Timestamp(milliseconds: 600_000))]
        let shifted = [Stop(start: Timestamp(milliseconds: 600_000), end: Timestamp(milliseconds: 1_200_000))]
        #expect(Self.unmatched(stops, in: shifted, minimum: 300).count == 1)
        #expect(Self.unmatched(stops, in: stops, minimum: 300).isEmpty)
    }
}
