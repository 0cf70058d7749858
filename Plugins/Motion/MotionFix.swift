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

    /// Metres along the ground to another fix.
    func distance(to other: MotionFix) -> Double {
        MotionGeometry.distance(latitude, longitude, other.latitude, other.longitude)
    }

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

    func distance(to fix: MotionFix) -> Double {
        MotionGeometry.distance(latitude, longitude, fix.latitude, fix.longitude)
    }
}

/// Distances between fixes, cheap where they are short.
enum MotionGeometry {
    /// Beyond this many metres the local plane's error (about a part in 10⁴ at 100 km) is not
    /// worth it: the geodesic is computed.
    static let planeLimit = 20_000.0

    /// Metres between two points: on the local plane of the WGS84 ellipsoid at their mean
    /// latitude (millimetres off over the few hundred metres between fixes), geodesic when far
    /// apart. Called two or three times per position, so it must cost little.
    @inline(__always)
    static func distance(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        var dLon = lon2 - lon1
        if dLon > 180 { dLon -= 360 } else if dLon < -180 { dLon += 360 }
        let scale = WGS84.metresPerDegree(atLatitude: (lat1 + lat2) / 2)
        let north = (lat2 - lat1) * scale.latitude, east = dLon * scale.longitude
        let d = (north * north + east * east).squareRoot()
        if d < planeLimit { return d }
        return Geodesic.distance(from: GeoPoint(latitude: lat1, longitude: lon1), to: GeoPoint(latitude: lat2, longitude: lon2))
    }
}
