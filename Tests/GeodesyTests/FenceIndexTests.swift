import GatewayTesting
import Testing
@testable import Geodesy

@Suite struct FenceIndexTests {
    /// Random boxes of very different sizes, some across the antimeridian, a few world-wide.
    static func randomBoxes(_ count: Int, using rng: inout SeededGenerator) -> [(id: Int, box: GeoBox)] {
        (0..<count).map { i in
            let lat = Double.random(in: -80...80, using: &rng)
            let lon = i % 50 == 0 ? Double.random(in: 175...180, using: &rng) : Double.random(in: -180..<180, using: &rng)
            let size = [0.001, 0.05, 1, 20, 400][Int.random(in: 0...4, using: &rng)] * Double.random(in: 0.5...1, using: &rng)
            return (id: i * 3 + 7, box: GeoBox(minLatitude: max(-90, lat - size / 2), maxLatitude: min(90, lat + size / 2),
                                               minLongitude: lon, maxLongitude: lon + size))
        }
    }

    @Test(arguments: [0, 1, 10, 17, 1_000, 10_000])
    func queriesEqualABruteForceScan(count: Int) {
        var rng = SeededGenerator(seed: UInt64(count) + 1)
        let entries = Self.randomBoxes(count, using: &rng)
        let index = FenceIndex(entries)
        #expect(index.count == count)
        for _ in 0..<500 {
            let p = GeoPoint(latitude: .random(in: -90...90, using: &rng), longitude: .random(in: -180...180, using: &rng))
            let got = index.candidates(containing: p)
            #expect(Set(got).count == got.count, "an id was reported twice")
            #expect(Set(got) == Set(entries.filter { $0.box.contains(p) }.map(\.id)))

            let lon = Double.random(in: -180..<180, using: &rng), lat = Double.random(in: -85...85, using: &rng)
            let size = [0.01, 2, 60, 359][Int.random(in: 0...3, using: &rng)]
            let q = GeoBox(minLatitude: lat, maxLatitude: min(90, lat + size / 4), minLongitude: lon, maxLongitude: lon + size)
            let hits = index.candidates(intersecting: q)
            #expect(Set(hits).count == hits.count, "an id was reported twice")
            #expect(Set(hits) == Set(entries.filter { $0.box.intersects(q) }.map(\.id)))
        }
    }

    @Test func findsBoxesTouchingTheAntimeridianFromEitherSide() {
        let west = GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: 179, maxLongitude: 180)
        let east = GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: -180, maxLongitude: -179)
        let across = GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: 179.5, maxLongitude: -179.5)
        let index = FenceIndex([(id: 1, box: west), (id: 2, box: east), (id: 3, box: across), (id: 4, box: .world)])
        for lon in [180.0, -180] {
            #expect(Set(index.candidates(containing: GeoPoint(latitude: 0.5, longitude: lon))) == [1, 2, 3, 4])
        }
        #expect(Set(index.candidates(containing: GeoPoint(latitude: 0.5, longitude: 179.2))) == [1, 4])
        #expect(index.candidates(containing: GeoPoint(latitude: 0.5, longitude: 179.7)).sorted() == [1, 3, 4])
    }

    @Test func buildsFromShapes() throws {
        let shapes: [FenceShape] = [
            .circle(try Circle(center: GeoPoint(latitude: 31.2, longitude: 121.5), radiusMeters: 500)),
            .polygon(try Polygon(geoJSON: [rectangle(116, 39, 117, 40)])),
        ]
        let index = FenceIndex(shapes: shapes)
        let p = GeoPoint(latitude: 39.5, longitude: 116.5)
        var found = [Int]()
        index.forEachCandidate(containing: p) { id in
            if shapes[id].contains(p) { found.append(id) }
        }
        #expect(found == [1])
    }
}

/// Found by Fuzz/GeoJSONFences (the input is in Tests/GeofenceTests/FuzzRegressionTests.swift).
@Suite struct FenceShapeBoxTests {
    /// Every point a shape does not call outside is in its box, so an index built from the
    /// boxes offers the shape for it: here the points within the boundary tolerance outside
    /// each side of a square, which `locate` calls boundary.
    @Test func aShapesBoxHoldsItsBoundaryTolerance() throws {
        let square = FenceShape.polygon(try polygon([rectangle(0, 0, 1, 1)]))
        let index = FenceIndex(shapes: [square])
        let nearly = Ring.boundaryTolerance / 2
        let points = [
            GeoPoint(latitude: -nearly, longitude: 0.5), GeoPoint(latitude: 1 + nearly, longitude: 0.5),
            GeoPoint(latitude: 0.5, longitude: -nearly), GeoPoint(latitude: 0.5, longitude: 1 + nearly),
        ]
        for point in points {
            #expect(square.locate(point) == .boundary, "\(point)")
            #expect(index.candidates(containing: point) == [0], "\(point)")
        }
        #expect(!square.box.contains(GeoPoint(latitude: -3 * Ring.boundaryTolerance, longitude: 0.5)))
    }
}
