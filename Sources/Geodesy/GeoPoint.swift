/// A latitude/longitude pair in degrees (datum-agnostic: the caller knows which datum it is in).
///
/// Longitudes are not normalised on construction: geometry types store longitudes unwrapped
/// (for example 181 for a ring crossing the antimeridian), and normalising here would undo that.
public struct GeoPoint: Sendable, Hashable {
    /// Degrees north, -90...90.
    public var latitude: Double
    /// Degrees east; usually -180...180, but may be unwrapped beyond ±180 inside geometry.
    public var longitude: Double

    /// Creates a point from degrees.
    @inlinable
    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Creates a point from a GeoJSON position `[longitude, latitude, (altitude…)]`.
    ///
    /// Throws when the array has fewer than two numbers, a value is not finite,
    /// or the latitude is outside -90...90.
    public init(geoJSON position: [Double]) throws(GeometryError) {
        guard position.count >= 2 else { throw .malformedPosition }
        let lon = position[0], lat = position[1]
        guard lon.isFinite, lat.isFinite, abs(lat) <= 90 else { throw .malformedPosition }
        self.init(latitude: lat, longitude: lon)
    }

    /// The same point with its longitude normalised into -180..<180.
    @inlinable
    public var normalized: GeoPoint {
        GeoPoint(latitude: latitude, longitude: normalizeLongitude(longitude))
    }
}

/// Normalises a longitude in degrees into -180..<180.
@inlinable
public func normalizeLongitude(_ longitude: Double) -> Double {
    if longitude >= -180 && longitude < 180 { return longitude }
    // The fast path above covers real fixes; the remainder handles unwrapped or odd input.
    var l = longitude.truncatingRemainder(dividingBy: 360)
    if l < -180 { l += 360 } else if l >= 180 { l -= 360 }
    return l
}
