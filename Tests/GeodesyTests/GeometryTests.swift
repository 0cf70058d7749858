import Foundation
import GatewayTesting
import Testing
@testable import Geodesy

/// Builds a polygon from `[lon, lat]` rings, failing the test instead of crashing on bad input.
func polygon(_ rings: [[[Double]]]) throws -> Polygon { try Polygon(geoJSON: rings) }

func rectangle(_ west: Double, _ south: Double, _ east: Double, _ north: Double) -> [[Double]] {
    [[west, south], [east, south], [east, north], [west, north], [west, south]]
}

/// Winding number (Sunday's algorithm): an independent point-in-ring test for comparisons.
func windingNumber(_ ring: [GeoPoint], _ p: GeoPoint) -> Int {
    var wn = 0
    for i in 0..<ring.count {
        let a = ring[i], b = ring[(i + 1) % ring.count]
        let isLeft = (b.longitude - a.longitude) * (p.latitude - a.latitude) - (p.longitude - a.longitude) * (b.latitude - a.latitude)
        if a.latitude <= p.latitude {
            if b.latitude > p.latitude && isLeft > 0 { wn += 1 }
        } else if b.latitude <= p.latitude && isLeft < 0 {
            wn -= 1
        }
    }
    return wn
}

/// Planar distance in degrees from p to the nearest edge of the ring.
func degreesToRing(_ ring: [GeoPoint], _ p: GeoPoint) -> Double {
    var best = Double.infinity
    for i in 0..<ring.count {
        let a = ring[i], b = ring[(i + 1) % ring.count]
        best = min(best, PlanarMath.squaredDistanceToSegment(
            a.longitude - p.longitude, a.latitude - p.latitude, b.longitude - p.longitude, b.latitude - p.latitude))
    }
    return best.squareRoot()
}

@Suite struct PointInPolygonTests {
    static let squareWithHole: [[[Double]]] = [rectangle(0, 0, 10, 10), rectangle(4, 4, 6, 6)]

    @Test(arguments: [
        (GeoPoint(latitude: 2, longitude: 2), PointLocation.inside),
        (GeoPoint(latitude: 5, longitude: 11), .outside),
        (GeoPoint(latitude: 5, longitude: 0), .boundary),     // west edge
        (GeoPoint(latitude: 0, longitude: 5), .boundary),     // south edge
        (GeoPoint(latitude: 10, longitude: 7.3), .boundary),  // north edge
        (GeoPoint(latitude: 0, longitude: 0), .boundary),     // vertex
        (GeoPoint(latitude: 10, longitude: 10), .boundary),   // vertex
        (GeoPoint(latitude: 5, longitude: 5), .outside),      // in the hole
        (GeoPoint(latitude: 5, longitude: 4), .boundary),     // on the hole's edge: inside the fence
        (GeoPoint(latitude: 6, longitude: 6), .boundary),     // hole vertex
        (GeoPoint(latitude: 5, longitude: 3.999), .inside),   // just outside the hole
        (GeoPoint(latitude: 10.000001, longitude: 5), .outside),
    ])
    func classifiesPointsOfASquareWithAHole(point: GeoPoint, expected: PointLocation) throws {
        let p = try polygon(Self.squareWithHole)
        #expect(p.locate(point) == expected)
        #expect(p.contains(point) == (expected != .outside))
        #expect(FenceShape.polygon(p).contains(point) == (expected != .outside))
    }

    @Test func pointsOnSlantedEdgesCountAsInside() throws {
        let triangle = try polygon([[[0, 0], [10, 0], [0, 10]]])
        #expect(triangle.locate(GeoPoint(latitude: 5, longitude: 5)) == .boundary)
        #expect(triangle.locate(GeoPoint(latitude: 3.3, longitude: 6.7)) == .boundary)
        // A computed point on a real-world edge: rounding is absorbed by the tolerance.
        let a = GeoPoint(latitude: 39.9163, longitude: 116.3971), b = GeoPoint(latitude: 39.9087, longitude: 116.4035)
        let c = GeoPoint(latitude: 39.9050, longitude: 116.3900)
        let fence = try Polygon(outer: Ring([a, b, c]))
        for t in stride(from: 0.0, through: 1.0, by: 0.013) {
            let p = GeoPoint(latitude: a.latitude + t * (b.latitude - a.latitude), longitude: a.longitude + t * (b.longitude - a.longitude))
            #expect(fence.locate(p) == .boundary, "t = \(t)")
        }
    }

    @Test func polygonsAcrossTheAntimeridianAreUnwrapped() throws {
        let fiji = try polygon([[[170, -10], [-170, -10], [-170, 10], [170, 10], [170, -10]]])
        #expect(fiji.box.crossesAntimeridian)
        #expect(fiji.box.minLongitude == 170 && fiji.box.maxLongitude == 190)
        for lon in [175.0, 179.999, 180, -180, -179.5, -171, 190, -190] {
            #expect(fiji.contains(GeoPoint(latitude: 0, longitude: lon)), "lon \(lon)")
        }
        for lon in [169.0, -169, 0, 10, -10] {
            #expect(!fiji.contains(GeoPoint(latitude: 0, longitude: lon)), "lon \(lon)")
        }
        #expect(fiji.locate(GeoPoint(latitude: 10, longitude: -175)) == .boundary)
        // The same fence written with unwrapped longitudes is the same fence.
        let unwrapped = try polygon([[[170, -10], [190, -10], [190, 10], [170, 10]]])
        #expect(unwrapped == fiji)
    }

    @Test func aPolygonWithThousandsOfVerticesMatchesItsCircle() throws {
        let center = GeoPoint(latitude: 39.9, longitude: 116.4)
        let ring = try Ring((0..<5_000).map { Geodesic.destination(from: center, distance: 1_000, bearing: Double($0) * 360 / 5_000) })
        let fence = Polygon(outer: ring)
        #expect(fence.outer.count == 5_000)
        for bearing in stride(from: 0.0, to: 360, by: 7.5) {
            #expect(fence.contains(Geodesic.destination(from: center, distance: 998, bearing: bearing)))
            #expect(!fence.contains(Geodesic.destination(from: center, distance: 1_002, bearing: bearing)))
        }
        let shape = FenceShape.polygon(fence)
        let near = Geodesic.destination(from: center, distance: 990, bearing: 33)
        #expect(abs(shape.distanceToBoundary(from: near) - 10) < 0.05)
        #expect(shape.signedDistanceToBoundary(from: near) < 0)
    }

    @Test func tinyPolygonsWorkBelowOneMetre() throws {
        // A 0.5 m square in Shanghai.
        let center = GeoPoint(latitude: 31.2, longitude: 121.5)
        let scale = WGS84.metresPerDegree(atLatitude: center.latitude)
        let h = (lat: 0.25 / scale.latitude, lon: 0.25 / scale.longitude)
        let fence = try polygon([rectangle(center.longitude - h.lon, center.latitude - h.lat, center.longitude + h.lon, center.latitude + h.lat)])
        #expect(fence.locate(center) == .inside)
        #expect(!fence.contains(Geodesic.destination(from: center, distance: 0.3, bearing: 90)))
        #expect(fence.contains(Geodesic.destination(from: center, distance: 0.2, bearing: 0)))
        #expect(abs(FenceShape.polygon(fence).distanceToBoundary(from: center) - 0.25) < 0.001)
    }

    @Test func hugePolygonsWork() throws {
        // A quarter of the globe in longitude, mid-latitudes, edges subdivided every degree.
        var outline = [[Double]]()
        for lon in stride(from: 60.0, through: 160, by: 1) { outline.append([lon, -50]) }
        for lon in stride(from: 160.0, through: 60, by: -1) { outline.append([lon, 70]) }
        let fence = try polygon([outline])
        #expect(fence.contains(GeoPoint(latitude: 0, longitude: 100)))
        #expect(fence.contains(GeoPoint(latitude: 69.99, longitude: 159.99)))
        #expect(!fence.contains(GeoPoint(latitude: 0, longitude: -100)))
        #expect(!fence.contains(GeoPoint(latitude: 71, longitude: 100)))
        #expect(fence.locate(GeoPoint(latitude: 70, longitude: 123.5)) == .boundary)
    }

    @Test func randomPolygonsAgreeWithTheWindingNumber() throws {
        var rng = SeededGenerator(seed: 2024)
        var compared = 0
        for _ in 0..<300 {
            // A random simple star-shaped polygon (vertices sorted by angle), possibly on the antimeridian.
            let cx = [Double.random(in: -170...170, using: &rng), 179.9][Int.random(in: 0...1, using: &rng)]
            let cy = Double.random(in: -60...60, using: &rng)
            let n = Int.random(in: 3...60, using: &rng)
            let angles = (0..<n).map { _ in Double.random(in: 0..<(2 * .pi), using: &rng) }.sorted()
            let outer = angles.map { a -> GeoPoint in
                let r = Double.random(in: 0.2...3, using: &rng)
                return GeoPoint(latitude: cy + r * sin(a), longitude: cx + r * cos(a))
            }
            let hole = [0.0, 2, 4].map { GeoPoint(latitude: cy + 0.1 * sin($0), longitude: cx + 0.1 * cos($0)) }
            let fence = try Polygon(outer: Ring(outer.map { GeoPoint(latitude: $0.latitude, longitude: normalizeLongitude($0.longitude)) }),
                                    holes: [Ring(hole)])
            for _ in 0..<100 {
                let p = GeoPoint(latitude: cy + .random(in: -3.5...3.5, using: &rng), longitude: cx + .random(in: -3.5...3.5, using: &rng))
                // Compare away from edges, where the tolerance legitimately decides.
                guard degreesToRing(outer, p) > 1e-9, degreesToRing(hole, p) > 1e-9 else { continue }
                let slow = windingNumber(outer, p) != 0 && windingNumber(hole, p) == 0
                // The library sees the point with a normalised longitude, as a fix would arrive.
                #expect(fence.contains(GeoPoint(latitude: p.latitude, longitude: normalizeLongitude(p.longitude))) == slow)
                compared += 1
            }
        }
        #expect(compared > 29_000)
    }
}

@Suite struct FenceShapeTests {
    static let center = GeoPoint(latitude: 31.23, longitude: 121.47)

    /// A ~100 m square around `center`.
    static func smallSquare() throws -> FenceShape {
        let s = WGS84.metresPerDegree(atLatitude: center.latitude)
        let h = (lat: 50 / s.latitude, lon: 50 / s.longitude)
        return .polygon(try polygon([rectangle(center.longitude - h.lon, center.latitude - h.lat, center.longitude + h.lon, center.latitude + h.lat)]))
    }

    @Test func aSegmentJumpingAcrossASmallFenceIntersectsIt() throws {
        let west = Geodesic.destination(from: Self.center, distance: 500, bearing: 270)
        let east = Geodesic.destination(from: Self.center, distance: 500, bearing: 90)
        for shape in [try Self.smallSquare(), .circle(try Circle(center: Self.center, radiusMeters: 50))] {
            #expect(!shape.contains(west) && !shape.contains(east))
            #expect(shape.segmentIntersects(from: west, to: east))
            #expect(shape.segmentIntersects(from: east, to: west))
        }
    }

    @Test func aSegmentPassingBesideDoesNotIntersect() throws {
        let north = Geodesic.destination(from: Self.center, distance: 200, bearing: 0)
        let a = Geodesic.destination(from: north, distance: 500, bearing: 270)
        let b = Geodesic.destination(from: north, distance: 500, bearing: 90)
        for shape in [try Self.smallSquare(), .circle(try Circle(center: Self.center, radiusMeters: 50))] {
            #expect(!shape.segmentIntersects(from: a, to: b))
        }
        // Grazing a corner counts: the boundary is inside.
        let square = try Self.smallSquare()
        // The vertex itself: the shape's box (for the index) is grown by the boundary tolerance.
        guard case .polygon(let polygon) = square else { Issue.record("not a polygon"); return }
        let corner = GeoPoint(latitude: polygon.box.maxLatitude, longitude: polygon.box.maxLongitude)
        #expect(square.segmentIntersects(from: GeoPoint(latitude: corner.latitude + 0.001, longitude: corner.longitude - 0.001),
                                         to: GeoPoint(latitude: corner.latitude - 0.001, longitude: corner.longitude + 0.001)))
    }

    @Test func segmentsAndHoles() throws {
        let fence = FenceShape.polygon(try polygon(PointInPolygonTests.squareWithHole))
        // Wholly inside the fence, wholly inside the hole, and from the hole out across the fence.
        #expect(fence.segmentIntersects(from: GeoPoint(latitude: 1, longitude: 1), to: GeoPoint(latitude: 2, longitude: 2)))
        #expect(!fence.segmentIntersects(from: GeoPoint(latitude: 4.5, longitude: 4.5), to: GeoPoint(latitude: 5.5, longitude: 5.5)))
        #expect(fence.segmentIntersects(from: GeoPoint(latitude: 5, longitude: 5), to: GeoPoint(latitude: 5, longitude: 20)))
        #expect(!fence.segmentIntersects(from: GeoPoint(latitude: 11, longitude: -1), to: GeoPoint(latitude: 11, longitude: 20)))
    }

    @Test func segmentsCrossFencesOnTheAntimeridian() throws {
        let fence = FenceShape.polygon(try polygon([[[179.9, -0.1], [-179.9, -0.1], [-179.9, 0.1], [179.9, 0.1]]]))
        #expect(fence.segmentIntersects(from: GeoPoint(latitude: 0, longitude: 179.5), to: GeoPoint(latitude: 0, longitude: -179.5)))
        #expect(fence.segmentIntersects(from: GeoPoint(latitude: 0, longitude: -179.5), to: GeoPoint(latitude: 0, longitude: 179.5)))
        #expect(!fence.segmentIntersects(from: GeoPoint(latitude: 1, longitude: 179.5), to: GeoPoint(latitude: 1, longitude: -179.5)))
        // The short way round from 170 to -170 crosses 180; it must not sweep across 0°.
        let zero = FenceShape.polygon(try polygon([rectangle(-1, -1, 1, 1)]))
        #expect(!zero.segmentIntersects(from: GeoPoint(latitude: 0, longitude: 170), to: GeoPoint(latitude: 0, longitude: -170)))
    }

    @Test func distanceToBoundaryInMetres() throws {
        let square = try Self.smallSquare()
        #expect(abs(square.distanceToBoundary(from: Self.center) - 50) < 0.05)
        #expect(abs(square.signedDistanceToBoundary(from: Self.center) + 50) < 0.05)
        let outside = Geodesic.destination(from: Self.center, distance: 150, bearing: 90)
        #expect(abs(square.distanceToBoundary(from: outside) - 100) < 0.1)
        #expect(square.signedDistanceToBoundary(from: outside) > 0)
        let circle = FenceShape.circle(try Circle(center: Self.center, radiusMeters: 1_000))
        #expect(abs(circle.distanceToBoundary(from: Geodesic.destination(from: Self.center, distance: 1_030, bearing: 123)) - 30) < 1e-3)
        let multi = FenceShape.multiPolygon(try MultiPolygon([
            try polygon([rectangle(0, 0, 1, 1)]), try polygon([rectangle(2, 0, 3, 1)]),
        ]))
        #expect(multi.contains(GeoPoint(latitude: 0.5, longitude: 2.5)))
        #expect(!multi.contains(GeoPoint(latitude: 0.5, longitude: 1.5)))
        let gap = WGS84.metresPerDegree(atLatitude: 0.5).longitude * 0.5
        #expect(abs(multi.distanceToBoundary(from: GeoPoint(latitude: 0.5, longitude: 1.5)) - gap) < 0.01)
        // The shape's box is the rings' grown by twice the boundary tolerance (FenceShape.box).
        #expect(multi.box == GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: 0, maxLongitude: 3).expanded(byDegrees: 2 * Ring.boundaryTolerance))
    }

    @Test func circlesAreGeodesic() throws {
        let circle = try Circle(center: GeoPoint(latitude: 60, longitude: 10), radiusMeters: 10_000)
        for bearing in stride(from: 0.0, to: 360, by: 15) {
            let inside = Geodesic.destination(from: circle.center, distance: 9_999, bearing: bearing)
            let outside = Geodesic.destination(from: circle.center, distance: 10_001, bearing: bearing)
            #expect(circle.contains(inside) && !circle.contains(outside))
            #expect(circle.box.contains(inside) && circle.box.contains(Geodesic.destination(from: circle.center, distance: 10_000, bearing: bearing)))
        }
        #expect(throws: GeometryError.invalidRadius) { try Circle(center: circle.center, radiusMeters: -1) }
    }
}

@Suite struct GeoJSONInitializerTests {
    @Test func rejectsMalformedInputWithItsLocation() {
        #expect(throws: GeometryError.tooFewVertices) { try Ring(geoJSON: [[0, 0], [1, 1], [0, 0]]) }
        #expect(throws: GeometryError.emptyPolygon) { try Polygon(geoJSON: []) }
        #expect(throws: GeometryError.emptyPolygon) { try MultiPolygon(geoJSON: []) }
        do {
            _ = try MultiPolygon(geoJSON: [[rectangle(0, 0, 1, 1)], [rectangle(0, 0, 1, 1), [[0, 0], [1], [1, 1], [0, 1]]]])
            Issue.record("accepted a one-number position")
        } catch {
            #expect(error == .malformedPosition)
            #expect(error.polygonIndex == 1 && error.ringIndex == 1 && error.positionIndex == 1)
        }
        #expect(throws: GeometryError.malformedPosition) { try GeoPoint(geoJSON: [10, 91]) }
        #expect(throws: GeometryError.malformedPosition) { try GeoPoint(geoJSON: [.nan, 1]) }
    }

    @Test func acceptsOpenAndClosedRingsAndAltitudes() throws {
        let closed = try Ring(geoJSON: rectangle(0, 0, 1, 1))
        let open = try Ring(geoJSON: [[0, 0, 12.5], [1, 0, 13], [1, 1], [0, 1]])
        #expect(closed == open)
        #expect(closed.count == 4)
        #expect(closed.points.first == GeoPoint(latitude: 0, longitude: 0))
    }
}

@Suite struct GeoBoxTests {
    @Test func normalisesAntimeridianBoxes() {
        let a = GeoBox(minLatitude: -1, maxLatitude: 1, minLongitude: 170, maxLongitude: -170)
        let b = GeoBox(minLatitude: -1, maxLatitude: 1, minLongitude: -190, maxLongitude: -170)
        #expect(a == b && a.minLongitude == 170 && a.maxLongitude == 190 && a.crossesAntimeridian)
        #expect(a.contains(GeoPoint(latitude: 0, longitude: 180)) && a.contains(GeoPoint(latitude: 0, longitude: -180)))
        #expect(!a.contains(GeoPoint(latitude: 0, longitude: 0)))
        #expect(GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: -180, maxLongitude: 180) == .world.intersectingLatitudes(0, 1))
    }

    @Test func intersectsAndUnionsOnTheLongitudeCircle() {
        let a = GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: 170, maxLongitude: -175)
        let b = GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: -178, maxLongitude: -100)
        let c = GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: 0, maxLongitude: 10)
        #expect(a.intersects(b) && b.intersects(a))
        #expect(!a.intersects(c))
        let u = a.union(b)
        #expect(u.minLongitude == 170 && u.maxLongitude == 260)
        let v = GeoBox(minLatitude: 0, maxLatitude: 1, minLongitude: -20, maxLongitude: 5).union(c)
        #expect(v.minLongitude == -20 && v.maxLongitude == 10)
    }
}

extension GeoBox {
    func intersectingLatitudes(_ south: Double, _ north: Double) -> GeoBox {
        GeoBox(minLatitude: south, maxLatitude: north, minLongitude: minLongitude, maxLongitude: maxLongitude)
    }
}
