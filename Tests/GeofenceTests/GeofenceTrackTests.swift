import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
@testable import Geofence
import Testing

/// Scripted tracks through the transform: hysteresis, jumps, dwell, reload, datums.
@Suite struct GeofenceTrackTests {
    let centre = GeoPoint(latitude: 52.0, longitude: 5.0)

    /// Eastward walk along y = 0 through a 200 m square (edges at x = ±100 m), jittering at both edges.
    func jitteryWalk() -> [GeoPoint] {
        let xs: [Double] = [-150, -140, -130, -120, -110,
                            -107, -93, -107,   // one deep spike inside: not enough for min_inside 2
                            -103, -98, -102, -97, -101, -99, -104, -96,   // border jitter ±4 m
                            -90, -80, -60, -40, -20, 0, 20, 40, 60, 80, 90,
                            97, 102, 98, 103, 99, 101, 96, 104,
                            107, 93, 107,   // a spike back inside after leaving the band
                            110, 120, 130, 140, 150]
        return xs.map { Support.offset(centre, east: $0, north: 0) }
    }

    func options(_ extra: String) -> String {
        #"{"fences":\#(Support.collection([Support.squareFeature(id: "yard", name: "Yard", centre: centre, half: 100)])),"events":["enter","exit"]\#(extra)}"#
    }

    @Test func borderJitterGivesExactlyOneEnterAndOneExit() throws {
        var t = try Support.transform(options(#","border_m":5,"min_inside":2,"min_outside":2"#))
        let track = jitteryWalk().enumerated().map { Support.position($0.element, t: $0.offset, n: $0.offset) }
        let out = Support.run(&t, track)
        #expect(Support.events(out) == ["enter:yard", "exit:yard"])
        // The enter is confirmed by the second position deeper than 5 m inside (x = -80), the exit by the
        // second one farther than 5 m outside (x = 110 after the spike at 93 broke the first streak).
        let enter = try #require(out.first { $0.event?.kind == .enter })
        let exit = try #require(out.first { $0.event?.kind == .exit })
        #expect(enter.id == "p17-enter-yard")
        #expect(enter.event?.fenceName == "Yard")
        #expect(exit.id == "p38-exit-yard")
        #expect(out.count == track.count + 2)
        #expect(t.fencesInside(device: "car").isEmpty)
    }

    @Test func withoutHysteresisTheSameWalkFlaps() throws {
        var t = try Support.transform(options(""))
        let out = Support.run(&t, jitteryWalk().enumerated().map { Support.position($0.element, t: $0.offset, n: $0.offset) })
        #expect(Support.events(out).filter { $0 == "enter:yard" }.count > 3)
    }

    @Test func durationThresholdsUsePositionTime() throws {
        var t = try Support.transform(options(#","min_inside":"5s","min_outside":"5s""#))
        // Inside at t = 0…4 (4 s: not yet), then 5 → enter at t = 5; a 2 s excursion outside does not exit.
        var points = (0...5).map { (Support.offset(centre, east: 0, north: 0), $0) }
        points += [(Support.offset(centre, east: 300, north: 0), 6), (Support.offset(centre, east: 300, north: 0), 8)]
        points += [(Support.offset(centre, east: 0, north: 0), 9)]
        points += (10...16).map { (Support.offset(centre, east: 300, north: 0), $0) }
        let out = Support.run(&t, points.enumerated().map { Support.position($0.element.0, t: $0.element.1, n: $0.offset) })
        #expect(Support.events(out) == ["enter:yard", "exit:yard"])
        #expect(out.first { $0.event?.kind == .enter }?.id == "p5-enter-yard")
        #expect(out.first { $0.event?.kind == .exit }?.id == "p14-exit-yard")   // t = 15, 5 s after t = 10
    }

    @Test func aJumpAcrossAFenceGivesEnterThenExit() throws {
        var t = try Support.transform(options(""))
        let out = Support.run(&t, [
            Support.position(Support.offset(centre, east: -500, north: 0), t: 0, n: 0),
            Support.position(Support.offset(centre, east: 500, north: 0), t: 60, n: 1),
            // A jump that passes north of the fence: nothing.
            Support.position(Support.offset(centre, east: -500, north: 300), t: 120, n: 2),
        ])
        #expect(Support.events(out) == ["enter:yard", "exit:yard"])
        #expect(out.map(\.id) == ["p0", "p1", "p1-enter-yard", "p1-exit-yard", "p2"])
    }

    @Test func aJumpAcrossACircleAndAMultiPolygon() throws {
        let circle = #"{"type":"Feature","properties":{"id":"ring","radius":50},"geometry":{"type":"Point","coordinates":[\#(centre.longitude),\#(centre.latitude)]}}"#
        let far = Support.offset(centre, east: 1000, north: 1000)
        let a = Support.offset(far, east: -100, north: -20), b = Support.offset(far, east: 100, north: 20)
        let multi = #"{"type":"Feature","properties":{"id":"multi"},"geometry":{"type":"MultiPolygon","coordinates":[[[[\#(a.longitude),\#(a.latitude)],[\#(b.longitude),\#(a.latitude)],[\#(b.longitude),\#(b.latitude)],[\#(a.longitude),\#(b.latitude)],[\#(a.longitude),\#(a.latitude)]]]]}}"#
        var t = try Support.transform(#"{"fences":\#(Support.collection([circle, multi])),"events":["enter","exit"]}"#)
        let out = Support.run(&t, [
            Support.position(Support.offset(centre, east: 0, north: -200), t: 0, n: 0),
            Support.position(Support.offset(centre, east: 0, north: 200), t: 10, n: 1),
            Support.position(Support.offset(far, east: 0, north: 200), t: 20, n: 2),
            Support.position(Support.offset(far, east: 0, north: -200), t: 30, n: 3),
        ])
        #expect(Support.events(out) == ["enter:ring", "exit:ring", "enter:multi", "exit:multi"])
    }

    @Test func dwellOncePerStay() throws {
        var t = try Support.transform(options(#","events":["enter","exit","dwell"],"loiter":"30s""#).replacingOccurrences(of: #","events":["enter","exit"]"#, with: ""))
        let inside = Support.offset(centre, east: 10, north: 10), outside = Support.offset(centre, east: 400, north: 0)
        var track = [Position]()
        var n = 0
        func add(_ p: GeoPoint, _ t: Int) { track.append(Support.position(p, t: t, n: n)); n += 1 }
        for s in stride(from: 0, through: 60, by: 10) { add(inside, s) }      // enter at 0, dwell at 30
        add(outside, 70)                                                      // exit
        for s in stride(from: 80, through: 105, by: 5) { add(inside, s) }     // enter at 80, dwell at 110 not reached
        add(inside, 110)                                                      // dwell
        let out = Support.run(&t, track)
        #expect(Support.events(out) == ["enter:yard", "dwell:yard", "exit:yard", "enter:yard", "dwell:yard"])
        #expect(out.filter { $0.event?.kind == .dwell }.map(\.id) == ["p3-dwell-yard", "p14-dwell-yard"])
    }

    @Test func poorAccuracyTriggersNoTransition() throws {
        var t = try Support.transform(options(#","max_horizontal_error":20"#))
        let out = Support.run(&t, [
            Support.position(Support.offset(centre, east: -300, north: 0), t: 0, n: 0, eph: 5),
            Support.position(Support.offset(centre, east: 0, north: 0), t: 1, n: 1, eph: 80),    // ignored
            Support.position(Support.offset(centre, east: 300, north: 0), t: 2, n: 2, eph: 80),  // ignored (no jump from p0 either)
            Support.position(Support.offset(centre, east: 10, north: 0), t: 3, n: 3, eph: 5),
        ])
        #expect(Support.events(out) == ["enter:yard"])
        #expect(out.first { $0.event != nil }?.id == "p3-enter-yard")
        #expect(out.filter { $0.event == nil }.count == 4)
    }

    @Test func stateIsPerDevice() throws {
        var t = try Support.transform(options(""))
        let inside = Support.offset(centre, east: 0, north: 0), outside = Support.offset(centre, east: 300, north: 0)
        let out = Support.run(&t, [
            Support.position(inside, t: 0, n: 0, device: "a"),
            Support.position(outside, t: 0, n: 1, device: "b"),
            Support.position(inside, t: 1, n: 2, device: "a"),
            Support.position(inside, t: 1, n: 3, device: "b"),
        ])
        #expect(out.filter { $0.event != nil }.map(\.id) == ["p0-enter-yard", "p3-enter-yard"])
        #expect(t.fencesInside(device: "a") == ["yard"])
    }

    @Test func aReloadMidTrackKeepsState() throws {
        let dir = try makeTemporaryDirectoryURL()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("fences.geojson")
        try Data(Support.collection([Support.squareFeature(id: "yard", centre: centre, half: 100)]).utf8).write(to: file)
        var t = try Support.transform(#"{"fences":"fences.geojson","events":["enter","exit"],"reload":"1s"}"#, base: dir.path)
        #expect(t.tickInterval == .seconds(1))
        var out = [Position]()
        t.process(Support.position(Support.offset(centre, east: 0, north: 0), t: 0, n: 0), into: &out)
        #expect(Support.events(out) == ["enter:yard"])

        // The yard grows and a second fence appears; the device is still inside the yard.
        try Data(Support.collection([
            Support.squareFeature(id: "yard", centre: centre, half: 150),
            Support.squareFeature(id: "shed", centre: Support.offset(centre, east: 2000, north: 0), half: 20),
        ]).utf8).write(to: file)
        t.tick(now: Timestamp(milliseconds: 0), into: &out)
        #expect(t.fences.map(\.id) == ["yard", "shed"])
        out.removeAll()
        t.process(Support.position(Support.offset(centre, east: 120, north: 0), t: 1, n: 1), into: &out)   // inside only the grown yard
        #expect(Support.events(out).isEmpty)
        t.process(Support.position(Support.offset(centre, east: 400, north: 0), t: 2, n: 2), into: &out)
        #expect(Support.events(out) == ["exit:yard"])

        // A broken file keeps the old fences.
        try Data("{ not json".utf8).write(to: file)
        t.tick(now: Timestamp(milliseconds: 0), into: &out)
        #expect(t.fences.map(\.id) == ["yard", "shed"])
    }

    @Test func bd09FencesWithWGS84Positions() throws {
        // A 200 m square in Beijing drawn in WGS84, converted to BD-09 for the fence file.
        let beijing = GeoPoint(latitude: 39.9087, longitude: 116.3975)
        let fence = Support.squareFeature(id: "square", centre: beijing, half: 100) { ChinaDatums.convert($0, from: .wgs84, to: .bd09) }
        var t = try Support.transform(#"{"fences":\#(Support.collection([fence])),"fence_datum":"bd09","action":"keep_inside","events":["enter","exit"]}"#)
        // The BD-09 shift here is several hundred metres: without conversion every one of these would be wrong.
        let shift = Geodesic.distance(from: beijing, to: ChinaDatums.convert(beijing, from: .wgs84, to: .bd09))
        #expect(shift > 500)
        let xs: [Double] = [-130, -80, 0, 80, 130]
        var track = xs.enumerated().map { Support.position(Support.offset(beijing, east: $0.element, north: 0), t: $0.offset, n: $0.offset) }
        // The same inside point reported in GCJ-02 and in BD-09 is inside too.
        let g = ChinaDatums.convert(Support.offset(beijing, east: 0, north: 90), from: .wgs84, to: .gcj02)
        let b = ChinaDatums.convert(Support.offset(beijing, east: 0, north: -90), from: .wgs84, to: .bd09)
        track.append(Support.position(g, t: 10, n: 10, device: "gcj", datum: .gcj02))
        track.append(Support.position(b, t: 11, n: 11, device: "bd", datum: .bd09))
        let out = Support.run(&t, track)
        #expect(out.filter { $0.event == nil }.map(\.id) == ["p1", "p2", "p3", "p10", "p11"])
        #expect(out.filter { $0.event != nil }.map(\.id) == ["p1-enter-square", "p4-exit-square", "p10-enter-square", "p11-enter-square"])
        // Positions keep their own coordinates and datum.
        #expect(out.first { $0.id == "p10" }?.datum == .gcj02)
        #expect(out.first { $0.id == "p10" }?.latitude == g.latitude)
    }
}
