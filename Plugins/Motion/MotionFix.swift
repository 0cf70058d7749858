import GatewayCore
import Geodesy

/// One on-time fix as the motion machines see it and keep it: where an event happened is one of these.
struct MotionFix: Sendable, Hashable {
    var id: PositionID
    var time: Timestamp
    var latitude: Double
    var longitude: Double
    /// Metres per second as the receiver reported it; nil when it did not.
    var speed: Double?

    /// Milliseconds from `earlier` to this fix.
    func milliseconds(since earlier: Timestamp) -> Int64 {
        time.milliseconds - earlier.milliseconds
    }
}

/// The fixes from one fix on: where it started, how far along the fixes, how many, how fast at most.
struct Leg: Sendable, Hashable {
    var start: MotionFix
    /// Metres along the fixes.
    var distance = 0.0
    /// Fixes, the start included.
    var fixes = 1
    /// The largest reported speed, m/s; nil when no fix reported one.
    var maxSpeed: Double?

    init(_ start: MotionFix) {
        self.start = start
        maxSpeed = start.speed
    }

    init(start: MotionFix, distance: Double, fixes: Int, maxSpeed: Double?) {
        self.start = start
        self.distance = distance
        self.fixes = fixes
        self.maxSpeed = maxSpeed
    }

    /// Goes on to `fix`, `step` metres from the previous one.
    mutating func extend(to fix: MotionFix, step: Double) {
        distance += step
        fixes += 1
        if let v = fix.speed { maxSpeed = Swift.max(maxSpeed ?? v, v) }
    }
}

/// The mean place of a stop's fixes, which GPS drift scatters around the true one.
struct Centre: Sendable, Hashable {
    var latitude: Double
    var longitude: Double
    var count: Int

    init(_ fix: MotionFix) {
        latitude = fix.latitude
        longitude = fix.longitude
        count = 1
    }

    init(latitude: Double, longitude: Double, count: Int) {
        self.latitude = latitude
        self.longitude = longitude
        self.count = max(1, count)
    }

    mutating func add(_ fix: MotionFix) {
        count += 1
        let n = Double(count)
        latitude += (fix.latitude - latitude) / n
        longitude += (fix.longitude - longitude) / n
    }

}

/// Metres per degree of latitude and of longitude on the WGS84 ellipsoid around one latitude:
/// the local plane distances between nearby fixes are measured on.
///
/// The trigonometry is done once per band of 0.01° of latitude (about 1.1 km), at the band's
/// middle, so a distance depends only on the two points and never on which fixes came before
/// (a restarted transform measures exactly as one that ran on). Over the few hundred metres
/// between fixes the plane is millimetres off the geodesic, and the band's scale differs from
/// the point's by less than 3 parts in 10⁴ below 60° of latitude.
struct PlaneScale: Sendable, Hashable {
    var latitude: Double
    var longitude: Double
    var band: Int

    /// The band `latitude` lies in.
    static func band(of latitude: Double) -> Int { Int((latitude * 100).rounded(.down)) }

    init(band: Int) {
        self.band = band
        let scale = WGS84.metresPerDegree(atLatitude: (Double(band) + 0.5) / 100)
        latitude = scale.latitude
        longitude = scale.longitude
    }

    /// Beyond this many metres the geodesic is computed instead.
    static let planeLimit = 20_000.0

    @inline(__always)
    func distance(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        var dLon = lon2 - lon1
        if dLon > 180 { dLon -= 360 } else if dLon < -180 { dLon += 360 }
        let north = (lat2 - lat1) * latitude, east = dLon * longitude
        let d = (north * north + east * east).squareRoot()
        if d < Self.planeLimit { return d }
        return Geodesic.distance(from: GeoPoint(latitude: lat1, longitude: lon1), to: GeoPoint(latitude: lat2, longitude: lon2))
    }

    @inline(__always)
    func distance(_ a: MotionFix, _ b: MotionFix) -> Double { distance(a.latitude, a.longitude, b.latitude, b.longitude) }

    @inline(__always)
    func distance(_ c: Centre, _ b: MotionFix) -> Double { distance(c.latitude, c.longitude, b.latitude, b.longitude) }
}
