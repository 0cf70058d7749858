import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
@testable import Geofence
import Testing

/// Late positions (older than the newest the geofence took for the device) are gated and
/// annotated but move no device across a fence.
@Suite struct GeofenceLateTests {
    let centre = GeoPoint(latitude: 52.0, longitude: 5.0)

    /// A transform over a 200 m square `yard` and, with `second`, a 200 m square `shed` 1 km
    /// east, counting into `stats`.
    func transform(_ extra: String, second: Bool = false, stats: ComponentStats = ComponentStats(id: "fence")) throws -> GeofenceTransform {
        var fences = [Support.squareFeature(id: "yard", centre: centre, half: 100)]
        if second { fences.append(Support.squareFeature(id: "shed", centre: Support.offset(centre, east: 1000, north: 0), half: 100)) }
        let (c, problems) = try Support.configure(#"{"fences":\#(Support.collection(fences))\#(extra)}"#)
        #expect(problems.isEmpty, "\(problems)")
        let context = ComponentContext(id: "fence", kind: .transform, logger: Logger(label: "test", handler: SilentLogHandler()), stats: stats)
        return try GeofenceTransform(configuration: c, context: context)
    }

    func at(east: Double, north: Double = 0, t: Int, n: Int) -> Position {
        Support.position(Support.offset(centre, east: east, north: north), t: t, n: n)
    }

    @Test func aLateFixInsideAfterTheExitIsAnnotatedAndMarkedButEntersNothing() throws {
        let stats = ComponentStats(id: "fence")
        var t = try transform(#","events":["enter","exit"]"#, stats: stats)
        let out = Support.run(&t, [at(east: -300, t: 0, n: 0), at(east: 0, t: 10, n: 1), at(east: 300, t: 20, n: 2),
                                   at(east: 50, t: 15, n: 3), at(east: 400, t: 30, n: 4)])
        #expect(Support.events(out) == ["enter:yard", "exit:yard"])
        #expect(out.map(\.id) == ["p0", "p1", "p1-enter-yard", "p2", "p2-exit-yard", "p3", "p4"])
        let late = try #require(out.first { $0.id == "p3" })
        #expect(late.attributes == ["fences": "yard", "fence_names": "yard", "late": "true"])
        #expect(out.filter { $0.attributes["late"] != nil }.count == 1)
        #expect(t.fencesInside(device: "car").isEmpty)
        #expect(stats.value("late") == 1)
        #expect(stats.dropped == 0)
    }

    @Test func aFixItsSourceMarkedLateEntersNothingThoughItIsTheNewest() throws {
        // A tracker's fixes stored out of coverage (JT/T 808's 0x0704 type 1) arrive marked: even
        // newer than anything seen, they change no state.
        let stats = ComponentStats(id: "fence")
        var t = try transform(#","events":["enter","exit"]"#, stats: stats)
        var stored = at(east: 0, t: 10, n: 1)
        LateFixes.mark(&stored)
        let out = Support.run(&t, [at(east: -300, t: 0, n: 0), stored, at(east: -300, t: 20, n: 2)])
        #expect(Support.events(out).isEmpty)
        #expect(out.first { $0.id == "p1" }?.attributes["fences"] == "yard")
        #expect(t.fencesInside(device: "car").isEmpty)
        #expect(stats.value("late") == 1)
    }

    @Test func aLateFixIsNotTheLastPointOfASegment() throws {
        var t = try transform(#","events":["enter","exit"]"#)
        // Had the late fix east of the yard become the last point, the segment from it to the
        // fix west of the yard would cross it: an enter and an exit.
        let out = Support.run(&t, [at(east: -300, north: 300, t: 0, n: 0), at(east: -300, north: 310, t: 10, n: 1),
                                   at(east: 300, t: 5, n: 2), at(east: -300, t: 20, n: 3)])
        #expect(Support.events(out).isEmpty)
        #expect(out.map(\.id) == ["p0", "p1", "p2", "p3"])
    }

    @Test func dropRemovesTheLateFixAndCountsIt() throws {
        let stats = ComponentStats(id: "fence")
        var t = try transform(#","events":["enter","exit"],"late":"drop""#, stats: stats)
        let out = Support.run(&t, [at(east: -300, t: 0, n: 0), at(east: 0, t: 10, n: 1), at(east: 300, t: 20, n: 2), at(east: 50, t: 15, n: 3)])
        #expect(out.map(\.id) == ["p0", "p1", "p1-enter-yard", "p2", "p2-exit-yard"])
        #expect(stats.value("late") == 1)
        #expect(stats.value("dropped.late") == 1)
        #expect(stats.dropped == 1)
    }

    @Test func aGatedLateFixIsCountedOnce() throws {
        let stats = ComponentStats(id: "fence")
        var t = try transform(#","events":["enter","exit"],"action":"keep_inside""#, stats: stats)
        let out = Support.run(&t, [at(east: 0, t: 10, n: 0), at(east: 300, t: 20, n: 1), at(east: 500, t: 15, n: 2), at(east: 50, t: 16, n: 3)])
        #expect(out.map(\.id) == ["p0", "p0-enter-yard", "p1-exit-yard", "p3"])
        #expect(out.last?.attributes["late"] == "true")
        #expect(stats.value("late") == 2)
        #expect(stats.value("dropped.outside") == 2)
    }

    @Test func withoutEventsNothingIsLate() throws {
        let stats = ComponentStats(id: "fence")
        var t = try transform("", stats: stats)
        let out = Support.run(&t, [at(east: 0, t: 10, n: 0), at(east: 0, t: 5, n: 1)])
        #expect(out.allSatisfy { $0.attributes["late"] == nil })
        #expect(stats.value("late") == 0)
    }

    // MARK: - A track with 5% of its fixes delivered 30–300 s late

    /// About two hours at 1 Hz with ±3 m noise (seeded): from 400 m west of the yard, stays in the yard
    /// and the shed (3–6 min each, long enough for a 2 min dwell) and drives through each without
    /// stopping, at 8–14 m/s between them.
    func track(seed: UInt64) -> [Position] {
        var rng = SeededGenerator(seed: seed)
        var east = -400.0
        var points: [Double] = []
        func drive(to target: Double) {
            let speed = Double.random(in: 8...14, using: &rng)
            while abs(target - east) > speed { east += target > east ? speed : -speed; points.append(east) }
            east = target
        }
        func stay() { for _ in 0..<Int.random(in: 180...360, using: &rng) { points.append(east) } }
        while points.count < 7200 - 900 {
            drive(to: 0); stay()                              // the yard
            drive(to: 1000); stay()                           // the shed
            drive(to: 1500); drive(to: -400)                  // back through both without stopping
            for _ in 0..<Int.random(in: 30...120, using: &rng) { points.append(east) }
        }
        return points.enumerated().map { i, x in
            at(east: x + Double.random(in: -3...3, using: &rng), north: Double.random(in: -3...3, using: &rng), t: i, n: i)
        }
    }

    static let rules = [
        #","events":["enter","exit","dwell"],"loiter":"2m""#,
        #","events":["enter","exit","dwell"],"loiter":"2m","border_m":5,"min_inside":2,"min_outside":"10s""#,
    ]

    @Test(arguments: rules)
    func fivePercentLateGivesTheEventsOfTheOrderedTrack(_ rule: String) throws {
        let track = track(seed: 4417)
        let (delivery, lateIds) = LateDelivery.delay(track, share: 0.05, delay: 30...300, seed: 30)
        #expect(lateIds.count == Int((Double(track.count) * 0.05).rounded()))

        var ordered = try transform(rule, second: true)
        let inOrder = Support.run(&ordered, track)
        let stats = ComponentStats(id: "fence")
        var late = try transform(rule, second: true, stats: stats)
        let delivered = Support.run(&late, delivery)

        let orderedEvents = inOrder.filter { $0.event != nil }, lateEvents = delivered.filter { $0.event != nil }
        #expect(Support.events(orderedEvents).count > 20)
        #expect(Set(Support.events(orderedEvents)) == ["enter:yard", "dwell:yard", "exit:yard", "enter:shed", "dwell:shed", "exit:shed"])
        #expect(Support.events(lateEvents) == Support.events(orderedEvents))
        // An event whose fix came late is reported on the next on-time fix: a second or two later.
        for (a, b) in zip(orderedEvents, lateEvents) {
            let shift = b.time!.milliseconds - a.time!.milliseconds
            #expect(shift >= 0 && shift <= 5_000, "\(a.id) → \(b.id)")
        }
        // Exactly what the on-time fixes alone give: the late ones changed nothing.
        var onTime = try transform(rule, second: true)
        #expect(lateEvents.map(\.id) == Support.run(&onTime, track.filter { !lateIds.contains($0.id) }).filter { $0.event != nil }.map(\.id))

        // Every late fix is passed once, marked, with the fences it lies in.
        #expect(stats.value("late") == lateIds.count)
        let marked = delivered.filter { $0.attributes["late"] == "true" }
        #expect(marked.count == lateIds.count && Set(marked.map(\.id)) == lateIds)
        let annotations = Dictionary(uniqueKeysWithValues: inOrder.filter { $0.event == nil }.map { ($0.id, $0.attributes["fences"]) })
        for p in marked { #expect(p.attributes["fences"] == annotations[p.id] ?? nil, "\(p.id)") }
    }

    @Test(arguments: rules)
    func takenAsBeforeTheSameLateFixesGiveFalseEvents(_ rule: String) throws {
        // The control: with every late fix taken as time starting again (a 1 ms limit: what the
        // transform did before late fixes were judged), this track's late fixes do change the
        // events — so the test above has something to catch. (6,795 fixes, 340 late: 70 events
        // in order and late; taken as before, 745 without hysteresis and 296 with it.)
        let track = track(seed: 4417)
        let (delivery, _) = LateDelivery.delay(track, share: 0.05, delay: 30...300, seed: 30)
        var ordered = try transform(rule, second: true)
        var old = try transform(rule + #","late_limit":"1ms""#, second: true)
        #expect(Support.events(Support.run(&old, delivery)) != Support.events(Support.run(&ordered, track)))
    }
}
