import Foundation
import GatewayCore
import Geodesy
@testable import Geofence
import Testing

/// The runtime's path: whole batches through `process(batch:)` give what positions one at a
/// time give, whatever the annotation cache saw before.
@Suite struct GeofenceBatchTests {
    let centre = GeoPoint(latitude: -33.86, longitude: 151.21)

    var fences: String {
        Support.collection([
            Support.squareFeature(id: "a", name: "Alpha", centre: centre, half: 100),
            Support.squareFeature(id: "b", centre: Support.offset(centre, east: 150, north: 0), half: 100),
        ])
    }

    /// In a, in a and b, in b, outside, in a again, in a with an attribute of its own, no fix.
    var track: [Position] {
        var points = [(0.0, 0.0), (75, 0), (200, 0), (500, 500), (-50, 0), (-60, 0)].enumerated().map { i, m in
            Support.position(Support.offset(centre, east: m.0, north: m.1), t: i, n: i)
        }
        points[5].attributes = ["fleet": "north", "fences": "stale"]
        points.append(Position(mode: .noFix, source: "rx", id: "p6"))
        return points
    }

    @Test(arguments: ["annotate", "keep_inside", "keep_outside"])
    func batchMatchesPositionAtATime(action: String) throws {
        let options = #"{"fences":\#(fences),"action":"\#(action)"}"#
        var one = try Support.transform(options)
        let expected = Support.run(&one, track)
        var batched = try Support.transform(options)
        var batch = track
        batched.process(batch: &batch)
        #expect(batch.map(\.id) == expected.map(\.id))
        #expect(batch.map(\.attributes) == expected.map(\.attributes))
    }

    @Test func batchAnnotationFollowsTheFencesOfEachPosition() throws {
        var t = try Support.transform(#"{"fences":\#(fences)}"#)
        var batch = track
        t.process(batch: &batch)
        #expect(batch.map(\.attributes) == [
            ["fences": "a", "fence_names": "Alpha"],
            ["fences": "a,b", "fence_names": "Alpha,b"],
            ["fences": "b", "fence_names": "b"],
            [:],
            ["fences": "a", "fence_names": "Alpha"],
            ["fleet": "north", "fences": "a", "fence_names": "Alpha"],
            [:],
        ])
    }

    @Test func batchWithEventsEmitsThemAfterTheirPosition() throws {
        var t = try Support.transform(#"{"fences":\#(fences),"events":["enter","exit"]}"#)
        var batch = Array(track.prefix(4))
        t.process(batch: &batch)
        #expect(batch.map(\.id) == ["p0", "p0-enter-a", "p1", "p1-enter-b", "p2", "p2-exit-a", "p3", "p3-exit-b"])
    }
}
