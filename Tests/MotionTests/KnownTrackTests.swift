import GatewayCore
import GatewayTesting
@testable import Motion
import Testing

/// Synthetic tracks whose answers are known (issue 46): each is run straight through, through a
/// transform restarted from its saved state every few positions, and with 5% of its fixes
/// arriving 30–300 s late.
@Suite struct KnownTrackTests {
    /// 50 km/h in m/s.
    static let town = 50 / 3.6

    /// A car parked for 2 h whose fixes scatter ±30 m each way, reporting speeds up to `speedNoise`
    /// m/s (5.4 km/h, above `moving_speed_kmh`, now and then), or no speed at all.
    static func parked(speedNoise: Double?) -> [Position] {
        var track = Track()
        track.park(7200, drift: 30, speedNoise: speedNoise)
        return track.positions
    }

    /// 5 km in three legs (1.5, 2 and 1.5 km at 50 km/h) with two 10 min stops between them,
    /// a minute parked before and 400 s after; parked fixes scatter ±5 m.
    static func fiveKilometres() -> [Position] {
        var track = Track()
        track.park(60, drift: 5, speedNoise: 0.3)
        track.drive(1500, speed: town)
        track.park(600, drift: 5, speedNoise: 0.3)
        track.drive(2000, speed: town, heading: 0)
        track.park(600, drift: 5, speedNoise: 0.3)
        track.drive(1500, speed: town, heading: 270)
        track.park(400, drift: 5, speedNoise: 0.3)
        return track.positions
    }

    @Test(arguments: [1.5, nil] as [Double?])
    func aParkedCarDriftingThirtyMetresMakesNoTrip(speedNoise: Double?) throws {
        let out = try Motion.run("{}", Self.parked(speedNoise: speedNoise))
        #expect(Motion.summary(out) == ["stop_start@1.0"], "one stop from the first fix, reported once it lasted 5 min; never a trip")
        #expect(out.count == 7201)
    }

    @Test func fiveKilometresWithTwoStopsAreThreeTripsAndTwoStops() throws {
        let out = Motion.events(try Motion.run("{}", Self.fiveKilometres()))
        #expect(out.map { $0.event!.kind } == [.tripStart, .tripEnd, .stopStart, .stopEnd, .tripStart, .tripEnd, .stopStart, .stopEnd,
                                               .tripStart, .tripEnd, .stopStart])
        let trips = out.filter { $0.event?.kind == .tripEnd }
        for (trip, (metres, seconds)) in zip(trips, [(1500.0, 108.0), (2000, 144), (1500, 108)]) {
            let distance = try #require(Motion.number(trip, "trip.distance_m"))
            let duration = try #require(Motion.number(trip, "trip.duration_s"))
            #expect(abs(distance - metres) <= metres * 0.02, "distance \(distance) m, known \(metres) m")
            #expect(abs(duration - seconds) <= seconds * 0.02, "duration \(duration) s, known \(seconds) s")
            #expect(abs(try #require(Motion.number(trip, "trip.max_speed_kmh")) - 50) < 0.1)
            #expect(abs(try #require(Motion.number(trip, "trip.avg_speed_kmh")) - metres / seconds * 3.6) <= 50 * 0.02)
            #expect(Motion.number(trip, "trip.fixes") == seconds + 2, "the fix it left from, every fix on the way, the first fix of the stop")
        }
        let stops = out.filter { $0.event?.kind == .stopEnd }
        #expect(stops.count == 2)
        for stop in stops {
            let duration = try #require(Motion.number(stop, "stop.duration_s"))
            #expect(abs(duration - 600) <= 600 * 0.02, "stop \(duration) s, known 600 s")
        }
        // Each trip starts where the stop before it ended, and ends where the next one starts.
        let starts = out.filter { $0.event?.kind == .tripStart }
        #expect(zip(stops, starts.dropFirst()).allSatisfy { $0.time == $1.time && $0.id.dropLast(9) == $1.id.dropLast(11) })
        let stopStarts = out.filter { $0.event?.kind == .stopStart }
        #expect(zip(trips, stopStarts).allSatisfy { $0.time == $1.time && $0.latitude == $1.latitude })
    }

    @Test func aTripIntoANinetyMinuteGapEndsAtTheLastFixBeforeIt() throws {
        var track = Track()
        track.park(60)
        track.drive(2000, speed: Self.town)
        let lastBefore = try #require(track.positions.last)
        track.silence(90 * 60)
        track.east += 3000
        track.drive(1000, speed: Self.town)
        track.park(400)
        let out = Motion.events(try Motion.run("{}", track.positions))
        #expect(out.map { $0.event!.kind } == [.tripStart, .tripEnd, .stopStart, .stopEnd, .tripStart, .tripEnd, .stopStart])
        let end = out[1]
        #expect(end.time == lastBefore.time)
        #expect(end.id == "\(lastBefore.id)-trip_end")
        #expect(abs(try #require(Motion.number(end, "trip.distance_m")) - 2000) < 40)
        #expect(out[2].id == "\(lastBefore.id)-stop_start")
        // The gap is the stop: from the last fix before it to the first after it, where the next trip starts.
        let firstAfter = try #require(track.positions.first { Motion.seconds($0.time) > Motion.seconds(lastBefore.time) })
        #expect(out[3].attributes["stop.duration_s"] == "5400")
        #expect(out[3].time == firstAfter.time && out[4].time == firstAfter.time)
        #expect(abs(try #require(Motion.number(out[5], "trip.distance_m")) - 1000) < 20, "the next trip does not reach back across the gap")
    }

    /// Parked with the ignition off, on for 2 min, a 3 km drive, off a minute after arriving.
    static func ignitionSequence() -> [Position] {
        var track = Track()
        track.ignition = false
        track.park(600)
        track.ignition = true
        track.park(120)
        track.drive(3000, speed: Self.town)
        track.park(60)
        track.ignition = false
        track.park(600)
        return track.positions
    }

    @Test func ignitionChangesAreEventsWhereTheyHappened() throws {
        let positions = Self.ignitionSequence()
        let out = Motion.events(try Motion.run("{}", positions))
        #expect(out.map { $0.event!.kind } == [.stopStart, .ignitionOn, .stopEnd, .tripStart, .ignitionOff, .tripEnd, .stopStart])
        let on = try #require(positions.first { $0.attributes["ignition"] == "true" })
        let off = try #require(positions.first { $0.attributes["ignition"] == "false" && Motion.seconds($0.time) > 700 })
        #expect(out[1].id == "\(on.id)-ignition_on" && out[1].time == on.time)
        #expect(out[4].id == "\(off.id)-ignition_off" && out[4].time == off.time)
        #expect(out[5].time! < off.time!, "the trip ended where the car stopped, a minute before the ignition went off")
    }

    @Test func withUseIgnitionTheIgnitionEndsTheTripAtOnce() throws {
        let positions = Self.ignitionSequence()
        let out = Motion.events(try Motion.run(#"{"use_ignition": true}"#, positions))
        #expect(out.map { $0.event!.kind } == [.stopStart, .ignitionOn, .stopEnd, .tripStart, .tripEnd, .stopStart, .ignitionOff])
        let off = try #require(positions.first { $0.attributes["ignition"] == "false" && Motion.seconds($0.time) > 700 })
        #expect(out[4].time == off.time, "the trip ends at the fix that reported the ignition off, not 5 min later")
        #expect(out[4].id == "\(off.id)-trip_end")
    }

    @Test func withUseIgnitionATowedCarMakesNoTrip() throws {
        var track = Track()
        track.ignition = false
        track.park(60)
        track.drive(2000, speed: 8)
        track.park(600)
        #expect(Motion.kinds(try Motion.run(#"{"use_ignition": true}"#, track.positions)) == [.stopStart])
        #expect(Motion.kinds(try Motion.run("{}", track.positions)) == [.tripStart, .tripEnd, .stopStart])
    }

    /// Cruising at 80 km/h under a 90 km/h limit; 40 s above it with two 5 s dips (100, 85,
    /// 105, 85, 95 km/h); later a 3 s spike.
    static func overspeed() -> [Position] {
        var track = Track()
        let kmh = { (v: Double) in v / 3.6 }
        track.cruise([(60, kmh(80)), (10, kmh(100)), (5, kmh(85)), (10, kmh(105)), (5, kmh(85)), (10, kmh(95)), (60, kmh(80)),
                      (3, kmh(100)), (60, kmh(80))])
        return track.positions
    }

    @Test func anOverspeedEpisodeWithDipsIsOneEventWithItsMaximum() throws {
        let positions = Self.overspeed()
        let out = Motion.events(try Motion.run(#"{"speed_limit_kmh": 90, "events": ["overspeed"]}"#, positions))
        #expect(out.count == 1, "\(Motion.summary(out))")
        let e = try #require(out.first)
        #expect(e.event?.kind == .overspeed)
        #expect(e.id == "\(positions[60].id)-overspeed", "dated at the first fix above the limit")
        #expect(Motion.number(e, "overspeed.max_speed_kmh") == 105)
        #expect(Motion.number(e, "overspeed.limit_kmh") == 90)
        #expect(Motion.number(e, "overspeed.duration_s") == 39)
        #expect(e.attributes["overspeed.end_time"] == positions[99].time?.iso8601)
    }

    @Test func aDeviceOrFenceLimitComesBeforeTheDefault() throws {
        // Truck limited to 80: the same cruise is over the limit from the start.
        var truck = Track(device: "truck-7")
        truck.cruise([(30, 85 / 3.6), (30, 70 / 3.6)])
        let json = #"{"speed_limit_kmh": 90, "device_speed_limits_kmh": {"truck-7": 80}, "fence_speed_limits_kmh": {"school": 30, "zone": 60}, "events": ["overspeed"]}"#
        let out = Motion.events(try Motion.run(json, truck.positions))
        #expect(out.count == 1 && Motion.number(out[0], "overspeed.limit_kmh") == 80)
        // In the school fence (named by a geofence's annotation) 40 km/h is too fast.
        var car = Track()
        car.cruise([(20, 40 / 3.6)])
        let inFence = car.positions.map { p in var p = p; p.attributes["fences"] = "zone,school"; return p }
        car.positions = []
        car.cruise([(20, 40 / 3.6)])
        let fenced = Motion.events(try Motion.run(json, inFence + car.positions.map { p in
            var p = p; p.id += "b"; p.time = p.time.map { Timestamp(milliseconds: $0.milliseconds + 20_000) }; return p
        }))
        #expect(fenced.count == 1)
        #expect(fenced.first?.attributes["overspeed.fence"] == "school")
        #expect(fenced.first.flatMap { Motion.number($0, "overspeed.limit_kmh") } == 30)
    }

    /// A drive, then 20 min parked with the engine running, then the ignition off.
    static func idling() -> [Position] {
        var track = Track()
        track.ignition = true
        track.park(60)
        track.drive(2000, speed: Self.town)
        track.park(1200, drift: 3, speedNoise: 0.2)
        track.ignition = false
        track.park(600)
        return track.positions
    }

    @Test func twentyMinutesIdlingIsOneIdleEvent() throws {
        let positions = Self.idling()
        let out = Motion.events(try Motion.run(#"{"idle_after": "10m"}"#, positions))
        #expect(out.map { $0.event!.kind } == [.tripStart, .tripEnd, .stopStart, .ignitionOff, .idle])
        let idle = out[4]
        #expect(idle.time == out[2].time, "idling from the stop's first fix")
        #expect(Motion.number(idle, "idle.duration_s") == 1200)
        #expect(idle.attributes["idle.end_time"] == out[3].time?.iso8601)
        #expect(Motion.kinds(try Motion.run(#"{"idle_after": "21m"}"#, positions)).contains(.idle) == false)
    }

    // MARK: - The same tracks restarted and late

    static let tracks: [(name: String, options: String, positions: [Position])] = [
        ("parked", "{}", parked(speedNoise: 1.5)),
        ("five kilometres", "{}", fiveKilometres()),
        ("ignition", "{}", ignitionSequence()),
        ("use ignition", #"{"use_ignition": true}"#, ignitionSequence()),
        ("overspeed", #"{"speed_limit_kmh": 90}"#, overspeed()),
        ("idling", #"{"idle_after": "10m"}"#, idling()),
    ]

    @Test(arguments: tracks.indices)
    func restartedEveryFewPositionsItGivesTheSameOutput(track: Int) throws {
        let (name, options, positions) = Self.tracks[track]
        let configuration = try Motion.configuration(options)
        let make = { MotionTransform(configuration: configuration, context: ComponentContext(id: "motion", kind: .transform,
                                                                                           logger: Logger(label: "t", handler: SilentLogHandler()), stats: ComponentStats(id: "m"))) }
        #expect(StateRoundTrip.check(make, positions, stops: Array(stride(from: 2, to: positions.count, by: 7))) == nil, "\(name)")
    }

    @Test(arguments: tracks.indices)
    func withFivePercentOfFixesLateTheEventsAreTheSame(track: Int) throws {
        let (name, options, positions) = Self.tracks[track]
        let steady = Motion.events(try Motion.run(options, positions))
        let (delivery, late) = LateArrival.deliver(positions, share: 0.05, delay: 30...300, seed: UInt64(track + 1))
        #expect(late.count > positions.count / 40, "\(name): \(late.count) late fixes")
        let stats = ComponentStats(id: "motion")
        let out = try Motion.run(options, delivery, stats: stats)
        #expect(stats.value("late") == late.count)
        #expect(out.filter { $0.attributes["late"] == "true" }.map(\.id).sorted() == late.sorted())
        let events = Motion.events(out)
        #expect(Self.difference(events, steady) == nil, "\(name)")
        // No event is dated at a late fix: late fixes change nothing.
        #expect(events.allSatisfy { e in !late.contains(String(e.id.dropLast(e.event!.kind.rawValue.count + 1))) })
    }

    /// Events are the same when their kinds agree in order, their times within 5 s, their
    /// durations, distances and speeds within 2 % (or 5 s, 10 m, 1 km/h): a late fix that would
    /// have been a trip's first is replaced by its neighbour.
    static func difference(_ got: [Position], _ expected: [Position]) -> String? {
        guard got.map(\.event) == expected.map(\.event) else { return "kinds \(Motion.summary(got)) vs \(Motion.summary(expected))" }
        for (g, e) in zip(got, expected) {
            if abs(Motion.seconds(g.time) - Motion.seconds(e.time)) > 5 { return "\(g.id) at \(Motion.seconds(g.time)) vs \(e.id) at \(Motion.seconds(e.time))" }
            for (key, value) in e.attributes {
                guard let x = Double(value) else { continue }
                guard let y = Motion.number(g, key) else { return "\(g.id): no \(key)" }
                let floor = key.hasSuffix("_s") ? 5.0 : key.hasSuffix("_m") ? 10 : key.hasSuffix("_kmh") ? 1 : key.hasSuffix("fixes") ? 20 : 1e-4
                if abs(x - y) > max(floor, abs(x) * 0.02) { return "\(g.id): \(key) \(y) vs \(x)" }
            }
        }
        return nil
    }
}
