import Foundation

/// The result of an inverse geodesic problem: distance and bearings between two points.
public struct GeodesicInverse: Sendable, Hashable {
    /// Length of the shortest path on the WGS84 ellipsoid, in metres.
    public var distance: Double
    /// Bearing at the start, degrees clockwise from true north, 0..<360.
    public var initialBearing: Double
    /// Bearing at the end (direction of travel on arrival), 0..<360.
    public var finalBearing: Double
}

/// Distances, bearings and destinations on the WGS84 ellipsoid and on a sphere.
///
/// The ellipsoidal functions use Vincenty's formulae (accurate to about 0.5 mm). Vincenty's
/// inverse does not converge for nearly antipodal points; there the distance is found by
/// minimising `s₁ + inverse(direct(p₁, α, s₁), p₂)` over the start azimuth α — the triangle
/// inequality makes the minimum exactly the geodesic distance, and both legs are far from
/// antipodal — so every pair of points gets a millimetre-accurate answer. All functions are
/// allocation-free.
public enum Geodesic {
    /// Geodesic distance in metres on the WGS84 ellipsoid.
    @inlinable
    public static func distance(from: GeoPoint, to: GeoPoint) -> Double {
        inverse(from: from, to: to).distance
    }

    /// Initial bearing in degrees (0..<360) of the geodesic on the WGS84 ellipsoid; 0 for equal points.
    @inlinable
    public static func initialBearing(from: GeoPoint, to: GeoPoint) -> Double {
        inverse(from: from, to: to).initialBearing
    }

    /// Distance and both bearings between two points on the WGS84 ellipsoid.
    public static func inverse(from: GeoPoint, to: GeoPoint) -> GeodesicInverse {
        if let result = vincentyInverse(from, to) { return result }
        return antipodalInverse(from, to)
    }

    /// The point reached after `distance` metres along the geodesic leaving `from` at `bearing` degrees.
    public static func destination(from: GeoPoint, distance: Double, bearing: Double) -> GeoPoint {
        vincentyDirect(from, distance: distance, bearing: bearing).point
    }

    /// Great-circle distance in metres on a sphere of radius ``WGS84/meanRadius`` (error up to ~0.6 %).
    @inlinable
    public static func haversineDistance(from: GeoPoint, to: GeoPoint) -> Double {
        let k = Double.pi / 180
        let dLat = (to.latitude - from.latitude) * k
        let dLon = (to.longitude - from.longitude) * k
        let s1 = sin(dLat / 2), s2 = sin(dLon / 2)
        let h = s1 * s1 + cos(from.latitude * k) * cos(to.latitude * k) * s2 * s2
        return 2 * WGS84.meanRadius * asin(min(1, h.squareRoot()))
    }

    /// Initial great-circle bearing in degrees (0..<360) on a sphere: cheap, within ~0.2° of the ellipsoidal one.
    @inlinable
    public static func sphericalBearing(from: GeoPoint, to: GeoPoint) -> Double {
        let k = Double.pi / 180
        let phi1 = from.latitude * k, phi2 = to.latitude * k
        let dLon = (to.longitude - from.longitude) * k
        let y = sin(dLon) * cos(phi2)
        let x = cos(phi1) * sin(phi2) - sin(phi1) * cos(phi2) * cos(dLon)
        return normalizeBearing(atan2(y, x) / k)
    }

    // MARK: - Vincenty

    /// Vincenty's inverse; nil when the iteration does not converge (nearly antipodal points).
    static func vincentyInverse(_ p1: GeoPoint, _ p2: GeoPoint) -> GeodesicInverse? {
        let a = WGS84.semiMajorAxis, b = WGS84.semiMinorAxis, f = WGS84.flattening
        let k = Double.pi / 180
        let l = normalizeLongitude(p2.longitude - p1.longitude) * k
        let tanU1 = (1 - f) * tan(p1.latitude * k)
        let cosU1 = 1 / (1 + tanU1 * tanU1).squareRoot(), sinU1 = tanU1 * cosU1
        let tanU2 = (1 - f) * tan(p2.latitude * k)
        let cosU2 = 1 / (1 + tanU2 * tanU2).squareRoot(), sinU2 = tanU2 * cosU2

        var lambda = l
        var sinLambda = 0.0, cosLambda = 0.0
        var sinSigma = 0.0, cosSigma = 0.0, sigma = 0.0
        var cosSqAlpha = 0.0, cos2SigmaM = 0.0
        var converged = false
        for _ in 0..<200 {
            sinLambda = sin(lambda)
            cosLambda = cos(lambda)
            let t1 = cosU2 * sinLambda
            let t2 = cosU1 * sinU2 - sinU1 * cosU2 * cosLambda
            let sinSqSigma = t1 * t1 + t2 * t2
            if sinSqSigma < 1e-30 {
                // Coincident points: distance 0. (Exactly antipodal points are also caught
                // here when sinSigma vanishes; let the fallback treat them.)
                if sinU1 * sinU2 + cosU1 * cosU2 * cosLambda > 0 {
                    return GeodesicInverse(distance: 0, initialBearing: 0, finalBearing: 0)
                }
                return nil
            }
            sinSigma = sinSqSigma.squareRoot()
            cosSigma = sinU1 * sinU2 + cosU1 * cosU2 * cosLambda
            sigma = atan2(sinSigma, cosSigma)
            let sinAlpha = cosU1 * cosU2 * sinLambda / sinSigma
            cosSqAlpha = 1 - sinAlpha * sinAlpha
            // On the equator (cosSqAlpha = 0) the term is undefined; 0 is its limit's usable value.
            cos2SigmaM = cosSqAlpha != 0 ? cosSigma - 2 * sinU1 * sinU2 / cosSqAlpha : 0
            let c = f / 16 * cosSqAlpha * (4 + f * (4 - 3 * cosSqAlpha))
            let previous = lambda
            lambda = l + (1 - c) * f * sinAlpha
                * (sigma + c * sinSigma * (cos2SigmaM + c * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
            if abs(lambda) > .pi + 1e-9 { return nil }
            if abs(lambda - previous) < 1e-12 {
                converged = true
                break
            }
        }
        guard converged else { return nil }
        let uSq = cosSqAlpha * (a * a - b * b) / (b * b)
        let bigA = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
        let bigB = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
        let deltaSigma = bigB * sinSigma * (cos2SigmaM + bigB / 4 * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)
            - bigB / 6 * cos2SigmaM * (-3 + 4 * sinSigma * sinSigma) * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
        let s = b * bigA * (sigma - deltaSigma)
        let alpha1 = atan2(cosU2 * sinLambda, cosU1 * sinU2 - sinU1 * cosU2 * cosLambda)
        let alpha2 = atan2(cosU1 * sinLambda, -sinU1 * cosU2 + cosU1 * sinU2 * cosLambda)
        return GeodesicInverse(
            distance: s, initialBearing: normalizeBearing(alpha1 / k), finalBearing: normalizeBearing(alpha2 / k))
    }

    /// Vincenty's direct problem: destination and final bearing (always converges).
    static func vincentyDirect(_ p1: GeoPoint, distance s: Double, bearing: Double) -> (point: GeoPoint, finalBearing: Double) {
        let a = WGS84.semiMajorAxis, b = WGS84.semiMinorAxis, f = WGS84.flattening
        let k = Double.pi / 180
        let alpha1 = bearing * k
        let sinAlpha1 = sin(alpha1), cosAlpha1 = cos(alpha1)
        let tanU1 = (1 - f) * tan(p1.latitude * k)
        let cosU1 = 1 / (1 + tanU1 * tanU1).squareRoot(), sinU1 = tanU1 * cosU1
        let sigma1 = atan2(tanU1, cosAlpha1)
        let sinAlpha = cosU1 * sinAlpha1
        let cosSqAlpha = 1 - sinAlpha * sinAlpha
        let uSq = cosSqAlpha * (a * a - b * b) / (b * b)
        let bigA = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
        let bigB = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))

        var sigma = s / (b * bigA)
        var sinSigma = 0.0, cosSigma = 0.0, cos2SigmaM = 0.0
        for _ in 0..<100 {
            cos2SigmaM = cos(2 * sigma1 + sigma)
            sinSigma = sin(sigma)
            cosSigma = cos(sigma)
            let deltaSigma = bigB * sinSigma * (cos2SigmaM + bigB / 4 * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)
                - bigB / 6 * cos2SigmaM * (-3 + 4 * sinSigma * sinSigma) * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
            let previous = sigma
            sigma = s / (b * bigA) + deltaSigma
            if abs(sigma - previous) < 1e-12 { break }
        }
        cos2SigmaM = cos(2 * sigma1 + sigma)
        sinSigma = sin(sigma)
        cosSigma = cos(sigma)
        let x = sinU1 * sinSigma - cosU1 * cosSigma * cosAlpha1
        let phi2 = atan2(sinU1 * cosSigma + cosU1 * sinSigma * cosAlpha1, (1 - f) * (sinAlpha * sinAlpha + x * x).squareRoot())
        let lambda = atan2(sinSigma * sinAlpha1, cosU1 * cosSigma - sinU1 * sinSigma * cosAlpha1)
        let c = f / 16 * cosSqAlpha * (4 + f * (4 - 3 * cosSqAlpha))
        let l = lambda - (1 - c) * f * sinAlpha
            * (sigma + c * sinSigma * (cos2SigmaM + c * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
        let lon2 = normalizeLongitude(p1.longitude + l / k)
        let alpha2 = atan2(sinAlpha, -x)
        return (GeoPoint(latitude: phi2 / k, longitude: lon2), normalizeBearing(alpha2 / k))
    }

    // MARK: - Nearly antipodal fallback

    /// Length of the first leg: about a quarter meridian, so both legs stay far from antipodal.
    static let antipodalFirstLeg = 10_000_000.0

    /// Minimises `s₁ + d(direct(p₁, α, s₁), p₂)` over α: a coarse scan, then golden-section refinement.
    static func antipodalInverse(_ p1: GeoPoint, _ p2: GeoPoint) -> GeodesicInverse {
        func total(_ alpha: Double) -> (Double, Double) {
            let mid = vincentyDirect(p1, distance: antipodalFirstLeg, bearing: alpha).point
            // Both legs are ~10,000 km, so the inner inverse converges; the spherical value is a
            // defensive stand-in that keeps this function total.
            guard let leg = vincentyInverse(mid, p2) else {
                return (antipodalFirstLeg + haversineDistance(from: mid, to: p2), 0)
            }
            return (antipodalFirstLeg + leg.distance, leg.finalBearing)
        }
        var bestAlpha = 0.0
        var best = Double.infinity
        var alpha = 0.0
        while alpha < 360 {
            let value = total(alpha).0
            if value < best { best = value; bestAlpha = alpha }
            alpha += 1
        }
        // Golden-section search on the bracket around the best sample.
        let ratio = (5.0.squareRoot() - 1) / 2
        var lo = bestAlpha - 1, hi = bestAlpha + 1
        var x1 = hi - ratio * (hi - lo), x2 = lo + ratio * (hi - lo)
        var f1 = total(x1).0, f2 = total(x2).0
        while hi - lo > 1e-10 {
            if f1 < f2 {
                hi = x2; x2 = x1; f2 = f1
                x1 = hi - ratio * (hi - lo); f1 = total(x1).0
            } else {
                lo = x1; x1 = x2; f1 = f2
                x2 = lo + ratio * (hi - lo); f2 = total(x2).0
            }
        }
        let alphaStar = (lo + hi) / 2
        let (distance, finalBearing) = total(alphaStar)
        return GeodesicInverse(
            distance: min(distance, best), initialBearing: normalizeBearing(alphaStar), finalBearing: finalBearing)
    }
}

/// Normalises a bearing in degrees into 0..<360.
@inlinable
public func normalizeBearing(_ degrees: Double) -> Double {
    var d = degrees.truncatingRemainder(dividingBy: 360)
    if d < 0 { d += 360 }
    return d >= 360 ? 0 : d
}
