import Foundation

/// Parameters of the WGS84 ellipsoid used by the geodesic functions.
public enum WGS84 {
    /// Semi-major axis (equatorial radius) in metres.
    public static let semiMajorAxis: Double = 6_378_137.0
    /// Flattening, 1/298.257223563.
    public static let flattening: Double = 1 / 298.257223563
    /// Semi-minor axis (polar radius) in metres.
    public static let semiMinorAxis: Double = semiMajorAxis * (1 - flattening)
    /// First eccentricity squared.
    public static let eccentricitySquared: Double = flattening * (2 - flattening)
    /// Mean radius R1 = (2a + b) / 3 in metres, the radius used by ``Geodesic/haversineDistance(from:to:)``.
    public static let meanRadius: Double = 6_371_008.771_415_059

    /// Metres per degree of latitude and of longitude at a latitude (local radii of curvature).
    ///
    /// Used for the local equirectangular projection of fence geometry: within a few
    /// kilometres it is accurate to millimetres, at 100 km to about a part in 10⁴.
    @inlinable
    public static func metresPerDegree(atLatitude latitude: Double) -> (latitude: Double, longitude: Double) {
        let phi = latitude * .pi / 180
        let s = sin(phi)
        let w2 = 1 - eccentricitySquared * s * s
        let w = w2.squareRoot()
        // Prime vertical radius N and meridional radius M.
        let n = semiMajorAxis / w
        let m = semiMajorAxis * (1 - eccentricitySquared) / (w2 * w)
        let k = Double.pi / 180
        return (m * k, n * cos(phi) * k)
    }
}
