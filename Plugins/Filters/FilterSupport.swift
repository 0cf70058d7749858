import GatewayCore
import Geodesy

/// Counts a dropped position: the runtime's `dropped` total and `dropped.<reason>`.
struct DropCounter: Sendable {
    let stats: ComponentStats

    func drop(_ reason: String) {
        stats.addDropped(1)
        stats.count("dropped.\(reason)")
    }
}

extension Position {
    /// The position's point, or nil without coordinates. Projected positions carry WGS84 degrees too.
    var geoPoint: GeoPoint? {
        guard let latitude, let longitude else { return nil }
        return GeoPoint(latitude: latitude, longitude: longitude)
    }
}

extension Timestamp {
    /// Seconds from `earlier` to this instant (negative when time went backwards).
    func seconds(since earlier: Timestamp) -> Double {
        Double(milliseconds - earlier.milliseconds) / 1000
    }
}
