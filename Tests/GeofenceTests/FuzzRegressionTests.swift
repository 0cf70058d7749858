import GatewayCore
import Geodesy
@testable import Geofence
import Testing

/// Inputs on which a fuzz target (`make fuzz`, Fuzz/README.md) found a defect, kept so it stays fixed.
@Suite struct FuzzRegressionTests {
    /// Fuzz/GeoJSONFences crash-e0299b28 (the whole input): a ring whose first vertex is 1e-40°
    /// north of the equator. The point (0, 0) is within the boundary tolerance of that vertex, so
    /// the fence contains it, but the index filed the fence under the vertices' exact box, which
    /// starts at 1e-40: the point was no candidate and the transform treated it as outside.
    static let crashInput = #"{"type":"Feature","properties":{"id":"pole"},"geometry":{"type":"Polygon","coordinates":[[[-360,1e-40 ,89],[185,89],[19,90],[-180,89]]]}}"#

    @Test func theIndexOffersAFenceForAPointOnItsBoundaryOutsideTheVerticesBox() throws {
        let fences = try FenceLoader().load(JSONValue.parse(string: Self.crashInput))
        let set = FenceSet(fences)
        let point = GeoPoint(latitude: 0, longitude: 0)
        #expect(fences.first?.shape.locate(point) == .boundary)
        #expect(set.index.candidates(containing: point) == [0])
    }

    /// What a user sees: a fix 5e-11° (5 µm) south of a fence's southern edge is on the boundary,
    /// which counts as inside, so `keep_inside` keeps it, as it keeps one that far inside.
    @Test(arguments: [-5e-11, 5e-11])
    func keepInsideKeepsAFixOnTheSouthernEdgeWithinTheTolerance(offset: Double) throws {
        let square = #"{"type":"Feature","properties":{"id":"sq"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}}"#
        var transform = try Support.transform(#"{"fences":{"type":"FeatureCollection","features":[\#(square)]},"action":"keep_inside"}"#)
        let fix = Support.position(GeoPoint(latitude: offset, longitude: 0.5), t: 0, n: 0)
        #expect(Support.run(&transform, [fix]).count == 1)
    }

    /// Fuzz/GeoJSONFences crash-e3ce17c5 (the whole input, 10-minute run): a polygon with a
    /// vertex at longitude 14352 (unwrapped to -48) whose corner (46.07, 14.52) is a vertex of
    /// another fence. The point 1e-10 degrees north-east of that corner, as the other fence's
    /// grown box gives it, is on this polygon's boundary by `locate`'s arithmetic (its unwrapping
    /// rounds by an ulp), but lay an ulp outside an index box grown by exactly the tolerance.
    static let cornerInput = #"{"type":"FeatureCollection","features":[{"type":"Feature","ptype":"Feature","properties":{"id":"depot","name":"Depot"},"geometry":{"type":"Polygon","coordinates":[[[14.52,46.07],[14.5,46.07],[14.5,46.05]],[[14.505,46.055],[14.51,46.055],[14.51,4.606],[14.505,46.055]]]}},{"type":"Feature","id":8,"properties":{"radius":150},"geometry":{"type":"Point","coordinates":[14.5058,46.0569]}},{"type":"Feature","properties":{"id":"islands"},"geometrroperties":{"id":"depot","name":"Depot"},"geometry":{"type":"Polygon","coordinates":[[[14.5,46.05],[14352,46.05],[14.52,46.07],[14.5,46.07],[14.5,46.05]],[[14.505,46.055],[14.51,46.055],[14.51,4.606],[14.505,46.055]]]}},{"type":"Feature","id":7,"properties":{"radius":150},"geometry":{"type":"Point","coordinates":[14.5058,46.0564]}},{"type":"Feature","properties":{"id":"is1lands"},"geometry":{"type":"MultiPolygon","coordinates":[[[[179.4,-15,-16],[179.5,-16],[179.5,-17]]],[[[0,0],[1,0],[0,1],[0,0]]]]}}]}"#

    @Test func theIndexOffersEveryFenceThatContainsAPointAnUlpBeyondTheTolerance() throws {
        let fences = try FenceLoader(idProperty: "id", nameProperty: "name").load(JSONValue.parse(string: Self.cornerInput))
        let set = FenceSet(fences)
        var probes: [GeoPoint] = []
        for fence in fences {
            let box = fence.shape.box
            probes += [GeoPoint(latitude: box.minLatitude, longitude: box.minLongitude),
                       GeoPoint(latitude: box.maxLatitude, longitude: box.maxLongitude)].map(\.normalized)
        }
        var checked = 0
        for point in probes {
            let candidates = Set(set.index.candidates(containing: point))
            for (offset, fence) in fences.enumerated() where fence.shape.contains(point) {
                #expect(candidates.contains(offset), "the index misses \(fence.id) at \(point)")
                checked += 1
            }
        }
        #expect(checked > 0)
    }
}
