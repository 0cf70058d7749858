import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
@testable import Geofence
import Testing

/// The geofence restarted from its saved per-device state continues exactly as one that never
/// stopped: no second enter, no lost exit, dwell once per stay, hysteresis streaks kept (issue 30).
@Suite struct GeofenceStateTests {
    let centre = GeoPoint(latitude: 52.0, longitude: 5.0)

    func make(_ extra: String) throws -> () -> GeofenceTransform {
        let fences = [Support.squareFeature(id: "yard", centre: centre, half: 100),
                      Support.squareFeature(id: "shed", centre: Support.offset(centre, east: 150, north: 0), half: 60)]
        let json = #"{"fences":\#(Support.collection(fences))\#(extra)}"#
        _ = try Support.transform(json)
        return { try! Support.transform(json) }
    }

    /// Two cars driving in and out of two overlapping fences, with late fixes.
    var track: [Position] {
        var rng = SeededGenerator(seed: 12)
        var all: [[Position]] = []
        for (k, device) in ["car", "van"].enumerated() {
            var fixes: [Position] = []
            for i in 0..<300 {
                let phase = Double(i) / 300 * 6 * .pi + Double(k)
                let east = 260 * sin(phase) + Double.random(in: -8...8, using: &rng)
                let north = 40 * cos(phase * 0.5)
                fixes.append(Support.position(Support.offset(centre, east: east, north: north), t: i * 4, n: i, device: device))
            }
            fixes = fixes.map { var p = $0; p.id = "\(p.device!)-\(p.id)"; return p }
            all.append(LateDelivery.delay(fixes, share: 0.05, delay: 5...40, keep: 10, seed: UInt64(k + 1)).delivery)
        }
        return zip(all[0], all[1]).flatMap { [$0, $1] }
    }

    @Test(arguments: [
        #","events":["enter","exit"]"#,
        #","events":["enter","exit","dwell"],"loiter":"20s","min_inside":3,"min_outside":"10s","border_m":5"#,
        #","events":["enter","exit"],"action":"keep_inside""#,
    ])
    func continuesAsIfItNeverStopped(_ options: String) throws {
        let make = try make(options)
        var steady = make()
        #expect(!Support.events(Support.run(&steady, track)).isEmpty, "the track crosses fences")
        #expect(StateRoundTrip.check(make, track, stops: Array(stride(from: 2, to: 600, by: 5))) == nil)
    }

    @Test func withoutEventsNothingIsKept() throws {
        let t = try make("")()
        #expect(!t.keepsState)
        #expect(try make(#","events":["exit"]"#)().keepsState)
    }

    /// A machine of a fence that no longer exists is not restored.
    @Test func stateOfAFenceThatIsGoneIsNotRestored() throws {
        var t = try make(#","events":["enter","exit"]"#)()
        try t.restore(device: "car", from: JSONValue.parse(string: #"{"newest":1700000000000,"fences":{"yard":{"inside":true,"since":1700000000000},"gone":{"inside":true}}}"#))
        #expect(t.fencesInside(device: "car") == ["yard"])
        #expect(t.snapshot(device: "car")?.jsonText == #"{"newest":1700000000000,"fences":{"yard":{"inside":true,"since":1700000000000}}}"#)
    }
}
