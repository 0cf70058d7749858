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
}
