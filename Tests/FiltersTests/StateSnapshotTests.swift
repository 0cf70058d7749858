import GatewayCore
import GatewayTesting
import Testing
@testable import Filters

/// Each filter restarted from its saved per-device state continues exactly as one that never
/// stopped (issue 30): stopped and restored after every few positions of three devices' tracks
/// with stationary stretches, repeats, jumps and late fixes.
@Suite struct StateSnapshotTests {
    /// Three devices, interleaved: a walk with pauses, exact repeats, 5 km jumps and 5% of fixes late.
    static let track: [Position] = {
        var rng = SeededGenerator(seed: 30)
        var all: [[Position]] = []
        for device in ["a", "b", "c"] {
            var north = 0.0
            var fixes: [Position] = []
            for i in 0..<400 {
                let step = Int.random(in: 0..<10, using: &rng)
                if step < 3 { north += Double.random(in: 0...3, using: &rng) } else if step < 9 { north += Double.random(in: 5...40, using: &rng) }
                let jump = step == 9 ? 5_000.0 : 0
                // Pauses longer than the gap now and then.
                let t = Double(i * 5 + (i % 97 == 0 ? 120 : 0))
                fixes.append(fix(t, north: north + jump, device: device))
                if step == 0 { fixes.append(fix(t, north: north + jump, device: device)) }
            }
            all.append(LateDelivery.delay(fixes, share: 0.05, delay: 6...60, keep: 20, seed: 7).delivery)
        }
        var merged: [Position] = []
        for i in 0..<all.map(\.count).max()! {
            for d in all where i < d.count { merged.append(d[i]) }
        }
        return merged
    }()

    static let stops = Array(stride(from: 3, to: 1200, by: 7))

    @Test func distanceFilter() {
        let make = { DistanceFilterTransform(configuration: DistanceFilterConfiguration(minDistance: 10, heartbeat: .seconds(30), gap: .seconds(60)), stats: ComponentStats(id: "t")) }
        #expect(StateRoundTrip.check(make, Self.track, stops: Self.stops) == nil)
    }

    @Test func throttle() {
        let make = { ThrottleTransform(configuration: ThrottleConfiguration(interval: .seconds(12)), stats: ComponentStats(id: "t")) }
        #expect(StateRoundTrip.check(make, Self.track, stops: Self.stops) == nil)
    }

    @Test func dedupe() {
        let make = { DedupeTransform(stats: ComponentStats(id: "t")) }
        #expect(StateRoundTrip.check(make, Self.track, stops: Self.stops) == nil)
    }

    @Test func jumpFilter() {
        let make = { JumpFilterTransform(configuration: JumpFilterConfiguration(maxSpeed: 20, resetAfter: 3), stats: ComponentStats(id: "t")) }
        #expect(StateRoundTrip.check(make, Self.track, stops: Self.stops) == nil)
    }

    /// The check itself fails when a restart loses state: a filter restored from nothing.
    @Test func aRestartWithoutStateIsCaught() {
        let make = { DistanceFilterTransform(configuration: DistanceFilterConfiguration(minDistance: 10), stats: ComponentStats(id: "t")) }
        #expect(StateRoundTrip.check(make, Self.track, stops: [10]) == nil)
        struct Forgetful: StatefulTransform {
            var inner: DistanceFilterTransform
            mutating func process(_ position: Position, into output: inout [Position]) { inner.process(position, into: &output) }
            var stateFormat: String { "forgetful" }
            mutating func recordStateChanges() { inner.recordStateChanges() }
            mutating func takeChangedDevices() -> [String] { inner.takeChangedDevices() }
            func snapshot(device: String) -> JSONValue? { inner.snapshot(device: device) }
            mutating func restore(device: String, from snapshot: JSONValue) throws(StateSnapshotError) {}
        }
        #expect(StateRoundTrip.check({ Forgetful(inner: make()) }, Self.track, stops: [10]) != nil)
    }

    @Test func aSnapshotOfTheWrongShapeIsRefused() {
        var t = DistanceFilterTransform(configuration: DistanceFilterConfiguration(), stats: ComponentStats(id: "t"))
        #expect(throws: StateSnapshotError.self) { try t.restore(device: "a", from: .string("x")) }
        #expect(throws: StateSnapshotError.self) { try t.restore(device: "a", from: .object(JSONObject([("lat", .string("north"))]))) }
        #expect(throws: StateSnapshotError.self) { try t.restore(device: "a", from: .object(JSONObject([]))) }
    }

    /// Only devices whose state changed are handed out, each once, and only once recording started.
    @Test func changedDevicesAreRecordedOnceRecordingStarts() {
        var t = ThrottleTransform(configuration: ThrottleConfiguration(interval: .seconds(60)), stats: ComponentStats(id: "t"))
        var out: [Position] = []
        t.process(fix(0, device: "a"), into: &out)
        #expect(t.takeStateChanges().isEmpty, "nothing recorded before recordStateChanges")
        t.recordStateChanges()
        for p in [fix(1, device: "a"), fix(2, device: "b"), fix(3, device: "a")] { t.process(p, into: &out) }
        let changes = t.takeStateChanges()
        #expect(Set(changes.map(\.device)) == ["a", "b"])
        #expect(changes.count == 2)
        #expect(t.takeStateChanges().isEmpty)
        #expect(changes.first { $0.device == "b" }?.state?.jsonText == #"{"passed":1700000002000,"newest":1700000002000}"#)
    }
}
