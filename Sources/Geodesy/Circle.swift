/// A circular fence: every point within `radiusMeters` (geodesic, WGS84) of `center`.
public struct Circle: Sendable, Hashable {
    /// The centre.
    public let center: GeoPoint
    /// Radius in metres along the ellipsoid.
    public let radiusMeters: Double
    /// A box containing the circle (slightly generous).
    public let box: GeoBox

    /// Creates a circle; throws ``GeometryError/invalidRadius`` for a negative or non-finite radius.
    public init(center: GeoPoint, radiusMeters: Double) throws(GeometryError) {
        guard radiusMeters.isFinite, radiusMeters >= 0 else { throw .invalidRadius }
        guard center.latitude.isFinite, center.longitude.isFinite, abs(center.latitude) <= 90 else {
            throw .malformedPosition
        }
        self.center = center
        self.radiusMeters = radiusMeters
        // 0.5 % margin covers the curvature terms the local radii leave out.
        let point = GeoBox(minLatitude: center.latitude, maxLatitude: center.latitude,
                           minLongitude: center.longitude, maxLongitude: center.longitude)
        box = point.expanded(byMetres: radiusMeters * 1.005 + 0.01)
    }

    /// Where the point lies: within 1 mm of the circle counts as the boundary.
    public func locate(_ point: GeoPoint) -> PointLocation {
        let d = Geodesic.distance(from: center, to: point)
        if abs(d - radiusMeters) <= 0.001 { return .boundary }
        return d < radiusMeters ? .inside : .outside
    }

    /// Whether the point is within the radius (boundary included).
    @inlinable
    public func contains(_ point: GeoPoint) -> Bool { locate(point) != .outside }
}
