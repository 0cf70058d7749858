/// Where the GCJ-02 shift applies: "outside China GCJ-02 is the identity".
///
/// Public libraries disagree on the region. `.box` uses the rectangle of eviltransform,
/// gcoord and PRCoords — longitude 72.004…137.8347 E, latitude 0.8293…55.8271 N, bounds
/// inclusive — the widest common one, so every Chinese city is shifted. It is a rectangle,
/// so parts of neighbouring countries inside it (South Korea, Mongolia, much of Vietnam…)
/// are shifted too, as they are by those libraries and by the map services that use GCJ-02.
/// wandergis/coordtransform uses the narrower 73.66…135.05 E, 3.86…53.55 N (strict).
public enum ChinaBounds: String, Sendable, Hashable, CaseIterable {
    /// Shift only inside the rectangle 72.004…137.8347 E, 0.8293…55.8271 N (inclusive).
    case box
    /// Shift everywhere (the caller knows its data is in China, or wants the raw formula).
    case none

    /// Western edge of ``box`` in degrees east.
    public static let minLongitude = 72.004
    /// Eastern edge of ``box`` in degrees east.
    public static let maxLongitude = 137.8347
    /// Southern edge of ``box`` in degrees north.
    public static let minLatitude = 0.8293
    /// Northern edge of ``box`` in degrees north.
    public static let maxLatitude = 55.8271

    /// Whether the shift applies at this point (the longitude is normalised into -180..<180 first).
    @inlinable
    public func applies(latitude: Double, longitude: Double) -> Bool {
        switch self {
        case .none:
            return true
        case .box:
            let longitude = normalizeLongitude(longitude)
            return longitude >= Self.minLongitude && longitude <= Self.maxLongitude
                && latitude >= Self.minLatitude && latitude <= Self.maxLatitude
        }
    }
}
