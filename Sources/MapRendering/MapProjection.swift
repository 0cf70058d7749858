import GatewayCore
import Geodesy

/// Places positions and fences in a map's display datum, the same way for the offline map and
/// the live one, so a BD-09 fence and WGS84 fixes line up (or visibly do not) on both.
public enum MapProjection {
    /// `wgs84`, `gcj02`, `bd09`; nil for anything else.
    public static func datum(named name: String) -> ChinaDatums.Datum? {
        switch name {
        case "wgs84": .wgs84
        case "gcj02": .gcj02
        case "bd09": .bd09
        default: nil
        }
    }

    public static func name(_ datum: ChinaDatums.Datum) -> String {
        switch datum {
        case .wgs84: "wgs84"
        case .gcj02: "gcj02"
        case .bd09: "bd09"
        }
    }

    /// The position's coordinates in the display datum; nil without coordinates or in a datum
    /// this cannot place (projected positions keep WGS84 latitude/longitude beside x/y).
    public static func point(_ position: Position, in display: ChinaDatums.Datum) -> MapPoint? {
        guard let lat = position.latitude, let lon = position.longitude, lat.isFinite, lon.isFinite, abs(lat) <= 90 else { return nil }
        let from: ChinaDatums.Datum
        switch position.datum {
        case .wgs84: from = .wgs84
        case .gcj02: from = .gcj02
        case .bd09: from = .bd09
        case let d where !d.isGeographic: from = .wgs84
        default: return nil
        }
        let p = ChinaDatums.convert(GeoPoint(latitude: lat, longitude: normalizeLongitude(lon)), from: from, to: display)
        return MapPoint(latitude: p.latitude, longitude: p.longitude)
    }

    /// A fence's geometry written in `from`, as drawn in `to`.
    public static func shape(_ shape: FenceShape, from: ChinaDatums.Datum, to: ChinaDatums.Datum) -> MapFence.Shape {
        func point(_ p: GeoPoint) -> MapPoint {
            let c = ChinaDatums.convert(p, from: from, to: to)
            return MapPoint(latitude: c.latitude, longitude: c.longitude)
        }
        func rings(_ polygon: Polygon) -> [[MapPoint]] {
            ([polygon.outer] + polygon.holes).map { ring in
                let points = ring.points.map(point)
                // Closed as GeoJSON writes them, so the drawn outline ends where it began.
                return points.first.map { points + [$0] } ?? points
            }
        }
        switch shape {
        case .circle(let c): return .circle(center: point(c.center), radiusMeters: c.radiusMeters)
        case .polygon(let p): return .polygons([rings(p)])
        case .multiPolygon(let m): return .polygons(m.polygons.map(rings))
        }
    }

    /// A datum views can draw in, for a position's or an area's datum; nil for a projection.
    public static func datum(_ datum: Datum) -> ChinaDatums.Datum? {
        switch datum {
        case .wgs84: .wgs84
        case .gcj02: .gcj02
        case .bd09: .bd09
        default: nil
        }
    }

    /// An area's outline converted from `from` into `to`, rings closed as GeoJSON writes them.
    public static func shape(_ shape: Area.Shape, from: ChinaDatums.Datum, to: ChinaDatums.Datum) -> MapFence.Shape {
        func point(_ p: Area.Point) -> MapPoint {
            let c = ChinaDatums.convert(GeoPoint(latitude: p.latitude, longitude: p.longitude), from: from, to: to)
            return MapPoint(latitude: c.latitude, longitude: c.longitude)
        }
        switch shape {
        case .circle(let center, let radius):
            return .circle(center: point(center), radiusMeters: radius)
        case .polygons(let polygons):
            return .polygons(polygons.map { rings in
                rings.map { ring in
                    let points = ring.map(point)
                    return points.first.map { points + [$0] } ?? points
                }
            })
        }
    }
}
