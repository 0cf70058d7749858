import GatewayCore
import GatewayTesting
@testable import Motion
import Testing

/// Options, the batch path, state snapshots and the positions that say nothing about motion.
@Suite struct MotionTransformTests {
    @Test func defaultsAreThoseOfTheOpenServers() throws {
        let c = try Motion.configuration()
        #expect(c.stopRadius == 100)
        #expect(abs(c.movingSpeed - 5 / 3.6) < 1e-12)
        #expect(c.movingDuration == .seconds(30))
        #expect(c.minStopDuration == .seconds(300))
        #expect(c.minTripDistance == 500)
        #expect(c.minTripDuration == .seconds(300))
        #expect(c.gap == .seconds(3600))
        #expect(c.useIgnition == false)
        #expect(c.speedLimit == nil && !c.tracksOverspeed)
        #expect(c.events == Set(PositionEvent.Kind.motionKinds))
        #expect(c.ms.minStop == 300_000 && c.ms.gap == 3_600_000 && c.ms.idle == 300_000)
    }

    @Test func optionsAreReadInTheirUnits() throws {
        let c = try Motion.configuration(#"{"moving_speed_kmh": 18, "speed_limit_kmh": 36, "device_speed_limits_kmh": {"t": 72}, "min_stop_duration": "2m", "events": ["trip_end"]}"#)
        #expect(c.movingSpeed == 5)
        #expect(c.speedLimit == 10)
        #expect(c.deviceSpeedLimits == ["t": 20])
        #expect(c.ms.minStop == 120_000)
        #expect(c.events == [.tripEnd])
    }

    @Test(arguments: [
        (#"{"events": ["enter"]}"#, "sources.under_test.events[0]"),
        (#"{"stop_radius_m": 0}"#, "sources.under_test.stop_radius_m"),
        (#"{"device_speed_limits_kmh": {"a": -1}}"#, "sources.under_test.device_speed_limits_kmh.a"),
        (#"{"fence_speed_limits_kmh": [30]}"#, "sources.under_test.fence_speed_limits_kmh"),
        (#"{"gap": "4m"}"#, "sources.under_test.gap"),
        (#"{"min_stop_duration": "0s"}"#, "sources.under_test.min_stop_duration"),
    ])
    func eachProblemIsReportedWithItsPath(json: String, path: String) throws {
        let (_, problems) = try PluginOptions.read(MotionPlugin.self, json)
        #expect(problems.map(\.path) == [path], "\(problems)")
    }

    @Test func onlyTheChosenKindsGoOutButAllAreCounted() throws {
        let stats = ComponentStats(id: "motion")
        let out = try Motion.run(#"{"events": ["trip_end"]}"#, KnownTrackTests.fiveKilometres(), stats: stats)
        #expect(Motion.kinds(out) == [.tripEnd, .tripEnd, .tripEnd])
        #expect(stats.value("events.trip_start") == 3)
        #expect(stats.value("events.stop_end") == 2)
    }

    /// The batch path (the runtime's) gives what one position at a time gives, for several
    /// devices interleaved, with late fixes and events in the same batches.
    @Test(arguments: [1, 7, 64, 1000])
    func theBatchPathGivesWhatPositionsOneByOneGive(batchSize: Int) throws {
        var a = Track(device: "a", seed: 1), b = Track(device: "b", seed: 2)
        a.park(60); a.drive(1500, speed: 14); a.park(400)
        b.ignition = true; b.park(400, drift: 20, speedNoise: 1); b.drive(900, speed: 9); b.park(400)
        var merged: [Position] = []
        for i in 0..<max(a.positions.count, b.positions.count) {
            if i < a.positions.count { merged.append(a.positions[i]) }
            if i < b.positions.count { merged.append(b.positions[i]) }
        }
        let delivery = LateArrival.deliver(merged, share: 0.05, delay: 30...300, seed: 9).delivery
        let expected = try Motion.run(#"{"speed_limit_kmh": 40}"#, delivery)
        var t = try Motion.transform(#"{"speed_limit_kmh": 40}"#)
        var got: [Position] = []
        for start in stride(from: 0, to: delivery.count, by: batchSize) {
            var batch = Array(delivery[start..<min(start + batchSize, delivery.count)])
            t.process(batch: &batch)
            got += batch
        }
        #expect(got == expected)
        #expect(Set(Motion.kinds(got)).isSuperset(of: [.tripStart, .tripEnd, .stopStart, .overspeed]))
    }

    @Test func positionsWithoutTimePlaceOrWithAnEventPassUntouched() throws {
        var track = Track()
        track.park(400)
        var odd = track.positions[10]
        odd.time = nil
        var noFix = track.positions[11]
        noFix.latitude = nil
        var fence = track.positions[12]
        fence.event = PositionEvent(kind: .enter, fenceId: "yard")
        fence.time = Timestamp(milliseconds: 0)
        let out = try Motion.run("{}", Array(track.positions[..<10]) + [odd, noFix, fence] + Array(track.positions[13...]))
        #expect(out.contains(odd) && out.contains(noFix) && out.contains(fence))
        #expect(Motion.kinds(out) == [.enter, .stopStart])
    }

    @Test func aSnapshotReadsBackAndAWrongOneIsRefused() throws {
        var t = try Motion.transform(#"{"speed_limit_kmh": 40}"#)
        t.recordStateChanges()
        var out: [Position] = []
        var track = Track()
        track.ignition = true
        track.park(60)
        track.cruise([(20, 50 / 3.6)])
        for p in track.positions { t.process(p, into: &out) }
        #expect(t.takeChangedDevices() == ["car"])
        let snapshot = try #require(t.snapshot(device: "car"))
        #expect(snapshot["moving"] == .bool(true))
        #expect(snapshot["overspeed"]?["max"] != nil)
        var restored = try Motion.transform(#"{"speed_limit_kmh": 40}"#)
        try restored.restore(device: "car", from: JSONValue.parse(string: snapshot.jsonText))
        #expect(restored.snapshot(device: "car") == snapshot)
        #expect(snapshot.jsonText.utf8.count < 1200, "\(snapshot.jsonText.utf8.count) bytes")
        for wrong in [#""x""#, #"{"last": {"id": "a"}}"#, #"{"last": {"id": "a", "t": 1, "lat": 1, "lon": 1}, "moving": true}"#,
                      #"{"stop": 3}"#, #"{"overspeed": {"first": {"id": "a", "t": 1, "lat": 1, "lon": 1}}}"#] {
            #expect(throws: StateSnapshotError.self, "\(wrong)") { try restored.restore(device: "car", from: JSONValue.parse(string: wrong)) }
        }
    }

    @Test func timeStartingAgainStartsTheDeviceAfresh() throws {
        var track = Track()
        track.park(400)
        track.drive(2000, speed: 14)
        track.park(3600)
        let replayed = track.positions.map { p in var p = p; p.id += "-again"; return p }
        let stats = ComponentStats(id: "motion")
        let out = try Motion.run("{}", track.positions + replayed, stats: stats)
        #expect(stats.value("time_reset") == 1)
        #expect(Motion.kinds(out) == [.stopStart, .stopEnd, .tripStart, .tripEnd, .stopStart] + [.stopStart, .stopEnd, .tripStart, .tripEnd, .stopStart])
    }
}
