import GatewayCore
import Geodesy

/// Converts each position's coordinates to the configured datum or projected CRS.
///
/// - Geographic targets (WGS84, GCJ-02, BD-09) rewrite latitude/longitude, set `datum`, and clear
///   x/y. The conversions are Geodesy's `ChinaDatums` (exact iterative inverses).
/// - Projected targets (`EPSG:<code>`) set x/y (easting/northing, metres) and `datum`, and keep
///   latitude/longitude as the geographic WGS84 coordinates the projection was computed from,
///   so every downstream consumer (geofences, distance filters, GPX) still has degrees.
/// - A position whose datum is a projected CRS carries WGS84 latitude/longitude (see above), so
///   it converts from WGS84.
/// - Positions without coordinates pass unchanged. A position in an unknown datum is dropped
///   (counted as `dropped.unknown_datum`) rather than silently mislabelled.
public struct CoordinatesTransform: PositionTransform {
    public let configuration: CoordinatesConfiguration
    private let projector: ProjTransformer?
    private let target: Datum
    private let logger: Logger
    private let stats: ComponentStats
    /// (counter, source) pairs already warned about, so each kind of surprise is reported once
    /// per source, not per fix.
    private var reported: Set<[String]> = []

    public init(configuration: CoordinatesConfiguration, context: ComponentContext) throws {
        self.configuration = configuration
        self.target = configuration.to.datum
        self.logger = context.logger
        self.stats = context.stats
        if case .projected(let code) = configuration.to {
            let p = try ProjTransformer(source: "EPSG:4326", target: "EPSG:\(code)")
            guard p.targetIsProjected else {
                throw ProjError(operation: "create EPSG:4326 → EPSG:\(code)", message: "\(p.targetName) is not a projected CRS")
            }
            projector = p
        } else {
            projector = nil
        }
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        var p = position
        if convert(&p) { output.append(p) }
    }

    public mutating func process(batch: inout [Position]) {
        batch.updateAndFilter { convert(&$0) }
    }

    /// Converts `p` where it lies; false when it is dropped.
    private mutating func convert(_ p: inout Position) -> Bool {
        guard let latitude = p.latitude, let longitude = p.longitude else { return true }
        let own: ChinaDatums.Datum
        if let d = CoordinatesTransform.chinaDatum(of: p.datum) {
            own = d
        } else if !p.datum.isGeographic {
            own = .wgs84
        } else {
            report(p, "is in the unknown datum \"\(p.datum.name)\"; dropping such positions", counter: "dropped.unknown_datum")
            stats.addDropped(1)
            return false
        }
        if let from = configuration.from, from != own {
            report(p, "is in \(p.datum.name), expected \(CoordinatesTransform.datum(of: from).name); converting from \(p.datum.name)", counter: "unexpected_datum")
        }
        let point = GeoPoint(latitude: latitude, longitude: longitude)
        // GCJ-02 is defined in China only: a WGS84 ↔ GCJ-02 step leaves a point outside unshifted.
        let gcjStep: Bool
        switch configuration.to {
        case .geographic(let to): gcjStep = own != to && (own == .wgs84 || to == .wgs84)
        case .projected: gcjStep = own != .wgs84
        }
        if gcjStep && !configuration.chinaBounds.applies(latitude: latitude, longitude: longitude) {
            report(p, "is outside China (\(latitude), \(longitude)): GCJ-02 leaves it unshifted (china_bounds \"box\"); its \(CoordinatesTransform.datum(of: own).name) coordinates pass on as they are", counter: "coordinates.outside_china")
        }
        switch configuration.to {
        case .geographic(let to):
            let q = ChinaDatums.convert(point, from: own, to: to, bounds: configuration.chinaBounds)
            p.latitude = q.latitude
            p.longitude = q.longitude
            p.x = nil
            p.y = nil
        case .projected:
            if p.datum == target, p.x != nil, p.y != nil { return true }
            let w = ChinaDatums.convert(point, from: own, to: .wgs84, bounds: configuration.chinaBounds)
            guard let projector else { return false }
            do {
                let xy = try projector.forward(longitude: w.longitude, latitude: w.latitude)
                p.latitude = w.latitude
                p.longitude = w.longitude
                p.x = xy.x
                p.y = xy.y
            } catch {
                logger.debug("dropped position \(p.id): \(error)")
                stats.count("dropped.projection")
                stats.addDropped(1)
                return false
            }
        }
        p.datum = target
        return true
    }

    /// Logs a warning the first time a source sends such a position; counts every one.
    private mutating func report(_ position: Position, _ message: String, counter: String) {
        stats.count(counter)
        if reported.insert([counter, position.source]).inserted {
            let from = position.source.isEmpty ? "a position" : "a position from \(position.source)"
            logger.warning("\(from) \(message) (reported once per source; counter \(counter))")
        }
    }

    /// Geodesy's datum for a position's datum, or nil when it is not WGS84, GCJ-02 or BD-09.
    static func chinaDatum(of datum: Datum) -> ChinaDatums.Datum? {
        switch datum {
        case .wgs84: .wgs84
        case .gcj02: .gcj02
        case .bd09: .bd09
        default: nil
        }
    }

    /// The position datum for a Geodesy datum.
    static func datum(of datum: ChinaDatums.Datum) -> Datum {
        switch datum {
        case .wgs84: .wgs84
        case .gcj02: .gcj02
        case .bd09: .bd09
        }
    }
}
