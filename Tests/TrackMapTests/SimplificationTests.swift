import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
import Testing
import TrackMap

/// Long tracks are cut to the point budget, keep their ends, and stay within the tolerance they report.
@Suite struct SimplificationTests {
    /// A seeded random walk: a boat wandering ~5 m a step near Shanghai.
    func walk(_ count: Int, seed: UInt64) -> (lat: [Double], lon: [Double]) {
        var rng = SeededGenerator(seed: seed)
        var lat = 31.2, lon = 121.5, heading = 0.0
        var lats = [Double](), lons = [Double]()
        for _ in 0..<count {
            heading += Double.random(in: -0.4...0.4, using: &rng)
            lat += cos(heading) * 5 / 111_000
            lon += sin(heading) * 5 / 95_000
            lats.append(lat)
            lons.append(lon)
        }
        return (lats, lons)
    }

    /// Distance in metres from p to the segment a–b (local plane at a).
    func distance(_ p: (Double, Double), _ a: (Double, Double), _ b: (Double, Double)) -> Double {
        let s = WGS84.metresPerDegree(atLatitude: a.0)
        let px = (p.1 - a.1) * s.longitude, py = (p.0 - a.0) * s.latitude
        let bx = (b.1 - a.1) * s.longitude, by = (b.0 - a.0) * s.latitude
        let l2 = bx * bx + by * by
        let t = l2 > 0 ? min(1, max(0, (px * bx + py * by) / l2)) : 0
        return ((px - t * bx) * (px - t * bx) + (py - t * by) * (py - t * by)).squareRoot()
    }

    @Test(arguments: [(5_000, 300), (20_000, 2_000), (1_000, 2)])
    func aSimplifiedTrackKeepsItsEndsAndEveryDroppedFixIsWithinTheReportedTolerance(count: Int, budget: Int) {
        let (lat, lon) = walk(count, seed: 19)
        let result = TrackSimplifier.simplify(latitudes: lat, longitudes: lon, maxPoints: budget)
        #expect(result.indices.count == budget)
        #expect(result.indices.first == 0 && result.indices.last == count - 1)
        #expect(zip(result.indices, result.indices.dropFirst()).allSatisfy { $0 < $1 })
        #expect(result.toleranceMeters > 0)
        var worst = 0.0
        for (a, b) in zip(result.indices, result.indices.dropFirst()) where b > a + 1 {
            for i in (a + 1)..<b {
                worst = max(worst, distance((lat[i], lon[i]), (lat[a], lon[a]), (lat[b], lon[b])))
            }
        }
        #expect(worst <= result.toleranceMeters + 1e-6, "a dropped fix is \(worst) m from the line, tolerance \(result.toleranceMeters) m")
        // The reported tolerance is attained, not a loose bound.
        #expect(worst >= result.toleranceMeters - 1e-6)
    }

    @Test func aTrackWithinTheBudgetIsKeptWhole() {
        let (lat, lon) = walk(500, seed: 7)
        let result = TrackSimplifier.simplify(latitudes: lat, longitudes: lon, maxPoints: 500)
        #expect(result.indices == Array(0..<500))
        #expect(result.toleranceMeters == 0)
    }

    @Test func aStraightLineNeedsOnlyItsEnds() {
        let lat = (0..<1000).map { 31.0 + Double($0) * 1e-5 }
        let lon = (0..<1000).map { 121.0 + Double($0) * 2e-5 }
        let result = TrackSimplifier.simplify(latitudes: lat, longitudes: lon, maxPoints: 100)
        #expect(result.indices == [0, 999])
        #expect(result.toleranceMeters < 1e-6)
    }

    @Test func theMapDrawsAtMostMaxPointsAndSaysItSimplified() async throws {
        let data = try embeddedData(try await mapPage(["--max-points", "40", boatLog]))
        let track = try #require(data["tracks"]?.arrayValue?.first)
        #expect(points(track["points"]).count == 40)
        #expect(track["originalCount"]?.numberValue == 149)
        let notes = data["notes"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(notes.contains { $0.hasPrefix("bundg_zeus_9.log: simplified from 149 to 40 points") }, "\(notes)")
        // Untouched at the default budget.
        let whole = try embeddedData(try await mapPage([boatLog]))
        #expect(points(whole["tracks"]?.arrayValue?.first?["points"]).count == 149)
        #expect(whole["notes"]?.arrayValue?.isEmpty == true)
    }
}
