import Foundation

/// Conversions between WGS84, GCJ-02 (AMap, Tencent, Google China) and BD-09 (Baidu).
///
/// The forward directions are the standard public formulas: GCJ-02 adds an offset computed
/// on the Krasovsky ellipsoid (a = 6378245.0, ee = 0.00669342162296594323) from
/// (lon − 105, lat − 35); BD-09 rotates and scales GCJ-02 (x_pi = π·3000/180, +0.0065/+0.006).
///
/// The inverses are exact: they iterate the forward formula as a fixed point,
/// `x ← x − (forward(x) − target)`. The first GCJ-02 step is the usual one-step inverse
/// (off by up to 4.9 m in China); BD-09 starts from its one-step inverse (off by up to
/// 0.22 m). The forward maps differ from a shift by a Jacobian within ~1 % of identity, so
/// each correction shrinks the error about a hundredfold: stopping once the residual is
/// below 1e-8° (after applying that last correction) leaves about 1e-10°: round trips over
/// China close within 11 µm (GCJ-02) and 21 µm (BD-09), measured by the tests. GCJ-02 takes
/// three or four forward evaluations, BD-09 two more. All functions are allocation-free.
///
/// Outside ``ChinaBounds`` the GCJ-02 shift is the identity. BD-09 ↔ GCJ-02 always applies
/// (as in every public library). An inverse decides by its *input*: a GCJ-02 point outside
/// the box is returned unchanged, so within ~700 m of the box edge a round trip may not close.
public enum ChinaDatums {
    /// A datum this enum converts between.
    public enum Datum: String, Sendable, Hashable, CaseIterable {
        /// WGS84, the datum GNSS receivers report.
        case wgs84
        /// GCJ-02, the obfuscated datum of Chinese map services (AMap, Tencent).
        case gcj02
        /// BD-09, Baidu's datum derived from GCJ-02.
        case bd09
    }

    /// Converts a point between any two of the supported datums.
    @inlinable
    public static func convert(_ point: GeoPoint, from: Datum, to: Datum, bounds: ChinaBounds = .box) -> GeoPoint {
        switch (from, to) {
        case (.wgs84, .wgs84), (.gcj02, .gcj02), (.bd09, .bd09): point
        case (.wgs84, .gcj02): wgs84ToGCJ02(point, bounds: bounds)
        case (.wgs84, .bd09): wgs84ToBD09(point, bounds: bounds)
        case (.gcj02, .wgs84): gcj02ToWGS84(point, bounds: bounds)
        case (.gcj02, .bd09): gcj02ToBD09(point)
        case (.bd09, .gcj02): bd09ToGCJ02(point)
        case (.bd09, .wgs84): bd09ToWGS84(point, bounds: bounds)
        }
    }

    // MARK: - GCJ-02

    /// WGS84 → GCJ-02 by the standard formula (identity outside `bounds`).
    public static func wgs84ToGCJ02(_ point: GeoPoint, bounds: ChinaBounds = .box) -> GeoPoint {
        guard bounds.applies(latitude: point.latitude, longitude: point.longitude) else { return point }
        return gcjForward(point)
    }

    /// GCJ-02 → WGS84, exact to < 1 µm by fixed-point iteration (identity outside `bounds`).
    public static func gcj02ToWGS84(_ point: GeoPoint, bounds: ChinaBounds = .box) -> GeoPoint {
        guard bounds.applies(latitude: point.latitude, longitude: point.longitude) else { return point }
        // Starting at the target makes the first step exactly the one-step inverse.
        var w = point
        for _ in 0..<maxIterations {
            let f = gcjForward(w)
            let dLat = f.latitude - point.latitude
            let dLon = f.longitude - point.longitude
            w.latitude -= dLat
            w.longitude -= dLon
            if abs(dLat) < tolerance && abs(dLon) < tolerance { break }
        }
        return w
    }

    // MARK: - BD-09

    /// GCJ-02 → BD-09 by the standard formula (applies everywhere).
    public static func gcj02ToBD09(_ point: GeoPoint) -> GeoPoint {
        let x = point.longitude, y = point.latitude
        let z = (x * x + y * y).squareRoot() + 0.00002 * sin(y * xPi)
        let theta = atan2(y, x) + 0.000003 * cos(x * xPi)
        return GeoPoint(latitude: z * sin(theta) + 0.006, longitude: z * cos(theta) + 0.0065)
    }

    /// BD-09 → GCJ-02, exact to < 1 µm by fixed-point iteration (applies everywhere).
    public static func bd09ToGCJ02(_ point: GeoPoint) -> GeoPoint {
        var g = bdApproximateInverse(point)
        for _ in 0..<maxIterations {
            let f = gcj02ToBD09(g)
            let dLat = f.latitude - point.latitude
            let dLon = f.longitude - point.longitude
            g.latitude -= dLat
            g.longitude -= dLon
            if abs(dLat) < tolerance && abs(dLon) < tolerance { break }
        }
        return g
    }

    /// WGS84 → BD-09 (GCJ-02 shift only inside `bounds`, BD-09 everywhere).
    public static func wgs84ToBD09(_ point: GeoPoint, bounds: ChinaBounds = .box) -> GeoPoint {
        gcj02ToBD09(wgs84ToGCJ02(point, bounds: bounds))
    }

    /// BD-09 → WGS84, exact (both steps iterate); the GCJ-02 step only inside `bounds`.
    public static func bd09ToWGS84(_ point: GeoPoint, bounds: ChinaBounds = .box) -> GeoPoint {
        gcj02ToWGS84(bd09ToGCJ02(point), bounds: bounds)
    }

    // MARK: - Formulas

    static let krasovskyA = 6378245.0
    static let krasovskyEE = 0.00669342162296594323
    static let xPi = Double.pi * 3000.0 / 180.0
    /// Residual in degrees (1 mm) below which the correction just applied is the last; see the type's comment.
    static let tolerance = 1e-8
    /// Convergence takes 2–4 iterations in China; the cap only bounds odd input (NaN, poles).
    static let maxIterations = 10

    /// The GCJ-02 forward shift, applied without a bounds check.
    @inline(__always)
    static func gcjForward(_ point: GeoPoint) -> GeoPoint {
        let d = gcjDelta(latitude: point.latitude, longitude: point.longitude)
        return GeoPoint(latitude: point.latitude + d.latitude, longitude: point.longitude + d.longitude)
    }

    /// The one-step inverse most libraries ship (error up to 4.9 m in China); used by tests.
    @inline(__always)
    static func gcjApproximateInverse(_ point: GeoPoint) -> GeoPoint {
        let d = gcjDelta(latitude: point.latitude, longitude: point.longitude)
        return GeoPoint(latitude: point.latitude - d.latitude, longitude: point.longitude - d.longitude)
    }

    /// The one-step BD-09 → GCJ-02 most libraries ship (error up to 0.22 m in China); the iteration's start.
    @inline(__always)
    static func bdApproximateInverse(_ point: GeoPoint) -> GeoPoint {
        let x = point.longitude - 0.0065, y = point.latitude - 0.006
        let z = (x * x + y * y).squareRoot() - 0.00002 * sin(y * xPi)
        let theta = atan2(y, x) - 0.000003 * cos(x * xPi)
        return GeoPoint(latitude: z * sin(theta), longitude: z * cos(theta))
    }

    /// The GCJ-02 offset in degrees at a WGS84 point: the published polynomial/sine series
    /// in metres-like units, scaled to degrees on the Krasovsky ellipsoid.
    @inline(__always)
    static func gcjDelta(latitude: Double, longitude: Double) -> (latitude: Double, longitude: Double) {
        let x = longitude - 105.0, y = latitude - 35.0
        let pi = Double.pi
        // The series' angles are multiples of φ = π·x/60 (and of π·y/60): x/30 is 2φ, x/12 is
        // 5φ, x/3 is 20φ, x is 60φ, 2x is 120φ, 6x is 360φ. Their sines follow from sin φ and
        // cos φ by the double- and triple-angle identities and one sum: four library calls for
        // the ten sines (a call is most of the cost of a conversion). Each identity adds an
        // ulp or so, growing with the multiple; the offset stays within 1.5e-16° of the
        // textbook formula's, every sine and cosine from the library (2M seeded random points
        // over the China box).
        let x1 = Multiples(x / 60.0 * pi), y1 = Multiples(y / 60.0 * pi)
        let x5 = x1.quintupled, y5 = y1.quintupled
        let x20 = x5.doubled.doubled, y20 = y5.doubled.doubled
        let x60 = x20.tripled
        let sin2x = x60.doubled.sin
        // Terms shared by both series.
        let common = (20.0 * Multiples.tripledSine(sin2x) + 20.0 * sin2x) * 2.0 / 3.0
        var dLat = -100.0 + 2.0 * x + 3.0 * y + 0.2 * y * y + 0.1 * x * y + 0.2 * abs(x).squareRoot()
        dLat += common
        dLat += (20.0 * Multiples.tripledSine(y20.sin) + 40.0 * y20.sin) * 2.0 / 3.0
        dLat += (160.0 * y5.sin + 320 * y1.doubled.sin) * 2.0 / 3.0
        var dLon = 300.0 + x + 2.0 * y + 0.1 * x * x + 0.1 * x * y + 0.1 * abs(x).squareRoot()
        dLon += common
        dLon += (20.0 * x60.sin + 40.0 * x20.sin) * 2.0 / 3.0
        dLon += (150.0 * x5.sin + 300.0 * x1.doubled.sin) * 2.0 / 3.0
        let radLat = latitude / 180.0 * pi
        let sinLat = sin(radLat)
        let magic = 1 - krasovskyEE * sinLat * sinLat
        let sqrtMagic = magic.squareRoot()
        // cos from sin: |latitude| <= 90 makes it the non-negative root; where the shift is
        // defined (cos >= 0.5 in China) 1 − sin² does not cancel, so it is within an ulp or two
        // of the call.
        let cosLat = (1 - sinLat * sinLat).squareRoot()
        dLat = (dLat * 180.0) / ((krasovskyA * (1 - krasovskyEE)) / (magic * sqrtMagic) * pi)
        dLon = (dLon * 180.0) / (krasovskyA / sqrtMagic * cosLat * pi)
        return (dLat, dLon)
    }
}

/// The sine and cosine of an angle, and of its multiples by identities instead of library calls
/// (``ChinaDatums/gcjDelta(latitude:longitude:)``).
struct Multiples {
    var sin: Double
    var cos: Double

    @inline(__always) init(_ angle: Double) {
        sin = Foundation.sin(angle)
        cos = Foundation.cos(angle)
    }

    @inline(__always) init(sin: Double, cos: Double) {
        self.sin = sin
        self.cos = cos
    }

    /// 2θ.
    @inline(__always) var doubled: Multiples {
        Multiples(sin: 2.0 * sin * cos, cos: 1.0 - 2.0 * sin * sin)
    }

    /// 3θ.
    @inline(__always) var tripled: Multiples {
        Multiples(sin: Multiples.tripledSine(sin), cos: cos * (4.0 * cos * cos - 3.0))
    }

    /// sin 3θ from sin θ.
    @inline(__always) static func tripledSine(_ s: Double) -> Double { s * (3.0 - 4.0 * s * s) }

    /// 5θ, as 4θ + θ.
    @inline(__always) var quintupled: Multiples {
        let four = doubled.doubled
        return Multiples(sin: four.sin * cos + four.cos * sin, cos: four.cos * cos - four.sin * sin)
    }
}
