import Foundation
import GatewayTesting
import Testing
@testable import Geodesy

@Suite struct GeodesicTests {
    /// Half the WGS84 meridian (pole to pole), a standard published constant.
    static let halfMeridian = 20_003_931.458_6

    @Test func oneDegreeOfEquatorIs111319point49Metres() {
        let d = Geodesic.distance(from: GeoPoint(latitude: 0, longitude: 0), to: GeoPoint(latitude: 0, longitude: 1))
        #expect(abs(d - 111_319.490_793) < 1e-3)
        #expect(abs(Geodesic.initialBearing(from: GeoPoint(latitude: 0, longitude: 0), to: GeoPoint(latitude: 0, longitude: 1)) - 90) < 1e-9)
    }

    @Test func meridianQuarterAndPoleToPole() {
        let quarter = Geodesic.distance(from: GeoPoint(latitude: 0, longitude: 0), to: GeoPoint(latitude: 90, longitude: 0))
        #expect(abs(quarter - Self.halfMeridian / 2) < 1e-3)
        let poles = Geodesic.distance(from: GeoPoint(latitude: 90, longitude: 0), to: GeoPoint(latitude: -90, longitude: 0))
        #expect(abs(poles - Self.halfMeridian) < 1e-3)
    }

    @Test func antipodalEquatorPointsAreJoinedOverAPole() {
        // Vincenty does not converge here; the fallback must find the meridian path.
        let p = GeoPoint(latitude: 0, longitude: 0), q = GeoPoint(latitude: 0, longitude: 180)
        #expect(Geodesic.vincentyInverse(p, q) == nil)
        let r = Geodesic.inverse(from: p, to: q)
        #expect(abs(r.distance - Self.halfMeridian) < 1e-3)
        #expect(abs(r.initialBearing) < 1e-3 || abs(r.initialBearing - 180) < 1e-3 || abs(r.initialBearing - 360) < 1e-3)
    }

    @Test(arguments: [
        GeoPoint(latitude: 0.5, longitude: 179.7),
        GeoPoint(latitude: -0.2, longitude: 179.9),
        GeoPoint(latitude: 30.1, longitude: -179.8),
    ])
    func nearlyAntipodalPointsGetAConsistentGeodesic(target: GeoPoint) {
        let start = GeoPoint(latitude: target.latitude > 20 ? -30 : 0, longitude: 0)
        let r = Geodesic.inverse(from: start, to: target)
        // Following the returned bearing for the returned distance must land on the target.
        let landed = Geodesic.destination(from: start, distance: r.distance, bearing: r.initialBearing)
        // The minimum is flat in the azimuth, so the bearing is looser than the distance.
        #expect(metres(landed, target) < 0.1, "\(metres(landed, target)) m")
        #expect(r.distance <= Self.halfMeridian + 1e-3 && r.distance > 19_900_000)
    }

    @Test func karneysNearlyAntipodalExample() {
        // Karney (2013), "Algorithms for geodesics": φ1 = −30°, φ2 = 29.9°, λ12 = 179.8°.
        let r = Geodesic.inverse(from: GeoPoint(latitude: -30, longitude: 0), to: GeoPoint(latitude: 29.9, longitude: 179.8))
        #expect(abs(r.distance - 19_989_832.827_61) < 1e-3, "\(r.distance)")
    }

    @Test func flindersPeakToBuninyongMatchesGeoscienceAustralia() {
        // Vincenty's worked example (GRS80 ≈ WGS84 to 0.1 mm here).
        func dms(_ d: Double, _ m: Double, _ s: Double) -> Double { (abs(d) + m / 60 + s / 3600) * (d < 0 ? -1 : 1) }
        let flinders = GeoPoint(latitude: dms(-37, 57, 3.72030), longitude: dms(144, 25, 29.52440))
        let buninyong = GeoPoint(latitude: dms(-37, 39, 10.15610), longitude: dms(143, 55, 35.38390))
        let r = Geodesic.inverse(from: flinders, to: buninyong)
        #expect(abs(r.distance - 54_972.271) < 1e-3)
        #expect(abs(r.initialBearing - dms(306, 52, 5.37)) < 1e-5)
        // Published as the reverse azimuth 127°10'25.07"; the travel direction on arrival is opposite.
        #expect(abs(r.finalBearing - (dms(127, 10, 25.07) + 180)) < 1e-5)
        let there = Geodesic.destination(from: flinders, distance: 54_972.271, bearing: dms(306, 52, 5.37))
        #expect(metres(there, buninyong) < 0.01)
    }

    @Test func coincidentPointsAreZeroApart() {
        let p = GeoPoint(latitude: 31.2, longitude: 121.5)
        #expect(Geodesic.distance(from: p, to: p) == 0)
        #expect(Geodesic.haversineDistance(from: p, to: p) == 0)
    }

    @Test func destinationThenInverseRoundTripsOnRandomLines() {
        var rng = SeededGenerator(seed: 42)
        var worstDistance = 0.0, worstBearing = 0.0
        for _ in 0..<2_000 {
            let p = GeoPoint(latitude: .random(in: -85...85, using: &rng), longitude: .random(in: -180..<180, using: &rng))
            let bearing = Double.random(in: 0..<360, using: &rng)
            let s = Double.random(in: 1...19_000_000, using: &rng)
            let q = Geodesic.destination(from: p, distance: s, bearing: bearing)
            let r = Geodesic.inverse(from: p, to: q)
            worstDistance = max(worstDistance, abs(r.distance - s))
            let db = abs(r.initialBearing - bearing)
            worstBearing = max(worstBearing, min(db, 360 - db))
        }
        #expect(worstDistance < 1e-3)
        #expect(worstBearing < 1e-6)
        report("destination/inverse round trip: max distance error \(worstDistance) m, bearing \(worstBearing)°")
    }

    @Test func haversineIsWithinSixTenthsOfAPercentOfTheEllipsoid() {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<1_000 {
            let p = GeoPoint(latitude: .random(in: -89...89, using: &rng), longitude: .random(in: -180..<180, using: &rng))
            let q = GeoPoint(latitude: .random(in: -89...89, using: &rng), longitude: .random(in: -180..<180, using: &rng))
            let e = Geodesic.distance(from: p, to: q), h = Geodesic.haversineDistance(from: p, to: q)
            #expect(abs(e - h) <= 0.006 * e + 1e-6)
            let de = Geodesic.initialBearing(from: p, to: q), ds = Geodesic.sphericalBearing(from: p, to: q)
            if e > 1_000 && e < 15_000_000 {
                #expect(min(abs(de - ds), 360 - abs(de - ds)) < 1, "\(p) → \(q)")
            }
        }
    }

    @Test func metresPerDegreeMatchesTheEllipsoid() {
        let equator = WGS84.metresPerDegree(atLatitude: 0)
        #expect(abs(equator.longitude - 111_319.490_793) < 1e-3)
        #expect(abs(equator.latitude - 110_574.275_8) < 0.01)
    }
}
