import Foundation
import GatewayCore
import Geodesy
@testable import Geofence
import Testing

/// Gating, annotation, the loader and option checking.
@Suite struct GeofenceActionTests {
    let centre = GeoPoint(latitude: -33.86, longitude: 151.21)

    /// Two overlapping squares (the second with a hole around the centre) and a circle.
    var fences: String {
        let o = centre
        let outer = [(-200.0, -200.0), (200, -200), (200, 200), (-200, 200), (-200, -200)].map { Support.offset(o, east: $0.0, north: $0.1) }
        let hole = [(-20.0, -20.0), (20, -20), (20, 20), (-20, 20), (-20, -20)].map { Support.offset(o, east: $0.0, north: $0.1) }
        func ring(_ r: [GeoPoint]) -> String { "[" + r.map { "[\($0.longitude),\($0.latitude)]" }.joined(separator: ",") + "]" }
        let holed = #"{"type":"Feature","id":7,"properties":{"name":"Donut"},"geometry":{"type":"Polygon","coordinates":[\#(ring(outer)),\#(ring(hole))]}}"#
        let c = Support.offset(o, east: 150, north: 0)
        let circle = #"{"type":"Feature","properties":{"id":"c","name":"Circle","radius":30},"geometry":{"type":"Point","coordinates":[\#(c.longitude),\#(c.latitude)]}}"#
        return Support.collection([Support.squareFeature(id: "a", name: "Alpha", centre: o, half: 100), holed, circle])
    }

    func run(_ extra: String, _ points: [(Double, Double)?]) throws -> [Position] {
        var t = try Support.transform(#"{"fences":\#(fences)\#(extra)}"#)
        let positions = points.enumerated().map { i, p in
            p.map { Support.position(Support.offset(centre, east: $0.0, north: $0.1), t: i, n: i) }
                ?? Position(mode: .noFix, source: "rx", id: "p\(i)")
        }
        return Support.run(&t, positions)
    }

    @Test func annotateListsContainingFencesInFileOrder() throws {
        let out = try run("", [(0, 0), (50, 50), (150, 0), (150, 150), (500, 500), nil])
        #expect(out.count == 6)
        #expect(out[0].attributes == ["fences": "a", "fence_names": "Alpha"])            // in the donut's hole
        #expect(out[1].attributes == ["fences": "a,7", "fence_names": "Alpha,Donut"])
        #expect(out[2].attributes == ["fences": "7,c", "fence_names": "Donut,Circle"])
        #expect(out[3].attributes == ["fences": "7", "fence_names": "Donut"])
        #expect(out[4].attributes.isEmpty)
        #expect(out[5].attributes.isEmpty)
    }

    @Test func keepInsideDropsOutsideAndCoordinateLessPositions() throws {
        let out = try run(#","action":"keep_inside""#, [(0, 0), (500, 500), (150, 150), nil, (-100, -100)])
        #expect(out.map(\.id) == ["p0", "p2", "p4"])   // p4 is on a vertex of "a": the boundary counts
        #expect(out.allSatisfy { $0.attributes.isEmpty })
    }

    @Test func projectedPositionsAreTestedByTheirWGS84LatitudeAndLongitude() throws {
        // What the coordinates transform writes for EPSG output: x/y in metres, WGS84 lat/lon kept.
        var t = try Support.transform(#"{"fences":\#(fences),"action":"keep_inside"}"#)
        var inside = Support.position(Support.offset(centre, east: 0, north: 0), t: 0, n: 0, datum: Datum(name: "EPSG:32756"))
        inside.x = 334_000; inside.y = 6_252_000
        let outside = Support.position(Support.offset(centre, east: 500, north: 500), t: 1, n: 1, datum: Datum(name: "EPSG:32756"))
        let out = Support.run(&t, [inside, outside])
        #expect(out.map(\.id) == [inside.id])
    }

    @Test func keepOutsidePassesCoordinateLessPositions() throws {
        let out = try run(#","action":"keep_outside""#, [(0, 0), (500, 500), nil])
        #expect(out.map(\.id) == ["p1", "p2"])
    }

    @Test func onlyRestrictsTheFencesThatCount() throws {
        let out = try run(#","action":"keep_inside","only":["c"]"#, [(0, 0), (150, 0), (150, 150)])
        #expect(out.map(\.id) == ["p1"])
    }

    @Test func eventsAreNotGated() throws {
        let out = try run(#","action":"keep_inside","only":["a"],"events":["exit"]"#, [(0, 0), (500, 0)])
        #expect(out.map(\.id) == ["p0", "p1-exit-a"])
    }

    @Test func configurationProblemsHavePaths() throws {
        let (_, p1) = try Support.configure(#"{"fences":{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"x"},"geometry":{"type":"LineString","coordinates":[[0,0],[1,1]]}}]},"events":["enter","leave","dwell"]}"#)
        #expect(p1.contains { $0.hasPrefix("transforms.fence.fences.features[0].geometry.type: unsupported geometry \"LineString\"") })
        #expect(p1.contains("transforms.fence.events[1]: expected \"enter\", \"exit\" or \"dwell\", got \"leave\""))
        #expect(p1.contains("transforms.fence.loiter: required when events include \"dwell\""))
        let (_, p2) = try Support.configure(#"{"fences":{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"x"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,1]]]}}, {"type":"Feature","properties":{},"geometry":null}]}}"#)
        #expect(p2.count == 1)
        #expect(p2.first?.hasPrefix("transforms.fence.fences.features[0].geometry.coordinates:") == true)
        let (_, p3) = try Support.configure(#"{"min_inside":0,"min_outside":true}"#)
        #expect(p3.contains("transforms.fence.fences: required option is missing: a GeoJSON file path or an inline FeatureCollection"))
        #expect(p3.contains { $0.hasPrefix("transforms.fence.min_inside:") })
        #expect(p3.contains { $0.hasPrefix("transforms.fence.min_outside:") })
    }

    @Test func duplicateIdsAndMissingFilesAreErrors() throws {
        let dup = Support.collection([Support.squareFeature(id: "a", centre: centre, half: 10), Support.squareFeature(id: "a", centre: centre, half: 20)])
        let (_, p) = try Support.configure(#"{"fences":\#(dup)}"#)
        #expect(p.first?.contains("duplicate fence id \"a\"") == true)
        #expect(throws: GeofenceSetupError.self) { try Support.transform(#"{"fences":"/nonexistent/fences.geojson"}"#) }
    }

    @Test func antimeridianFence() throws {
        let f = #"{"type":"Feature","properties":{"id":"fiji"},"geometry":{"type":"Polygon","coordinates":[[[179,-17],[-179,-17],[-179,-16],[179,-16],[179,-17]]]}}"#
        var t = try Support.transform(#"{"fences":\#(Support.collection([f])),"action":"keep_inside"}"#)
        let pts = [(-16.5, 179.5), (-16.5, -179.5), (-16.5, 180.0), (-16.5, 178.5), (-16.5, -178.5)]
        let out = Support.run(&t, pts.enumerated().map { Support.position(GeoPoint(latitude: $0.element.0, longitude: $0.element.1), t: $0.offset, n: $0.offset) })
        #expect(out.map(\.id) == ["p0", "p1", "p2"])
    }

    @Test func readmeTableMatchesTheOptions() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Plugins/Geofence/README.md").standardized
        let rows = try String(contentsOf: readme, encoding: .utf8).split(separator: "\n")
            .filter { $0.hasPrefix("| `") }
            .compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) }
        #expect(rows == GeofencePlugin.info.options.map(\.name))
    }

    @Test func sampleConfiguresAndEveryOptionIsRead() throws {
        guard case .object(let sample) = try JSONValue.parse(string: GeofencePlugin.info.sample) else { throw GeofenceSetupError(description: "sample is not an object") }
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: sample, path: "transforms.fence", diagnostics: diagnostics, baseDirectory: "/tmp")
        reader.markKnown(["type", "inputs"])
        let c = GeofencePlugin.configure(&reader)
        reader.finish()
        #expect(diagnostics.problems.isEmpty, "\(diagnostics.problems)")
        #expect(c.action == .keepInside)
        #expect(c.rule == FenceRule(minInside: .positions(2), minOutside: .duration(.seconds(10)), loiter: .seconds(300)))
        #expect(Set(reader.askedKeys).isSuperset(of: GeofencePlugin.info.options.map(\.name)))
    }

    @Test func stateMachineHysteresis() {
        var m = FenceStateMachine()
        let rule = FenceRule(minInside: .positions(2), minOutside: .positions(3))
        func t(_ s: Int64) -> Timestamp { Timestamp(milliseconds: s * 1000) }
        #expect(m.event(.inside, at: t(0), rule: rule) == .none)
        #expect(m.event(.border, at: t(1), rule: rule) == .none)
        #expect(m.event(.inside, at: t(2), rule: rule) == .none)
        #expect(m.event(.inside, at: t(3), rule: rule) == .enter)
        #expect(m.insideSince == t(2))
        #expect(m.event(.outside, at: t(4), rule: rule) == .none)
        #expect(m.event(.outside, at: t(5), rule: rule) == .none)
        #expect(m.event(.inside, at: t(6), rule: rule) == .none)
        #expect(m.event(.outside, at: t(7), rule: rule) == .none)
        #expect(m.event(.outside, at: t(8), rule: rule) == .none)
        #expect(m.event(.outside, at: t(9), rule: rule) == .exit)
        #expect(m.isIdle)
        #expect(m.event(.outside, at: t(10), crossed: true, rule: rule) == [.enter, .exit])
    }
}
