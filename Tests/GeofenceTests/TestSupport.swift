import Foundation
import GatewayCore
import Geodesy
@testable import Geofence

/// Builds geofence transforms from JSON options and scripted tracks in local metres.
enum Support {
    static let context = ComponentContext(id: "fence", kind: .transform, logger: Logger(label: "test", handler: SilentLogHandler()), stats: ComponentStats(id: "fence"))

    /// Reads options as the runtime does; returns the problems instead of throwing.
    static func configure(_ json: String, base: String = "/") throws -> (GeofenceConfiguration, [String]) {
        guard case .object(let object) = try JSONValue.parse(string: json) else { throw GeofenceSetupError(description: "test JSON must be an object") }
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: "transforms.fence", diagnostics: diagnostics, baseDirectory: base)
        let c = GeofencePlugin.configure(&reader)
        reader.finish()
        return (c, diagnostics.problems.map { "\($0.path): \($0.message)" })
    }

    static func transform(_ json: String, base: String = "/") throws -> GeofenceTransform {
        let (c, problems) = try configure(json, base: base)
        guard problems.isEmpty else { throw GeofenceSetupError(description: problems.joined(separator: "; ")) }
        return try GeofenceTransform(configuration: c, context: ComponentContext(id: "fence", kind: .transform, logger: Logger(label: "test", handler: SilentLogHandler()), stats: ComponentStats(id: "fence")))
    }

    /// A point `east`/`north` metres from an origin (local flat approximation, fine at fence scale).
    static func offset(_ origin: GeoPoint, east: Double, north: Double) -> GeoPoint {
        let metresPerDegreeLat = 111_320.0
        let metresPerDegreeLon = 111_320.0 * cos(origin.latitude * .pi / 180)
        return GeoPoint(latitude: origin.latitude + north / metresPerDegreeLat, longitude: origin.longitude + east / metresPerDegreeLon)
    }

    /// A GeoJSON square `half` metres either side of `centre`, as a Feature (points optionally mapped, e.g. to BD-09).
    static func squareFeature(id: String, name: String? = nil, centre: GeoPoint, half: Double, map: (GeoPoint) -> GeoPoint = { $0 }) -> String {
        let corners = [(-half, -half), (half, -half), (half, half), (-half, half), (-half, -half)]
            .map { map(offset(centre, east: $0.0, north: $0.1)) }
            .map { "[\($0.longitude), \($0.latitude)]" }.joined(separator: ",")
        let props = name.map { #"{"id":"\#(id)","name":"\#($0)"}"# } ?? #"{"id":"\#(id)"}"#
        return #"{"type":"Feature","properties":\#(props),"geometry":{"type":"Polygon","coordinates":[[\#(corners)]]}}"#
    }

    static func collection(_ features: [String]) -> String {
        #"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#
    }

    /// A position at a point with a time in seconds; the id is `p<n>`.
    static func position(_ p: GeoPoint, t: Int, n: Int, device: String = "car", eph: Double? = nil, datum: Datum = .wgs84) -> Position {
        Position(time: Timestamp(milliseconds: 1_700_000_000_000 + Int64(t) * 1000), latitude: p.latitude, longitude: p.longitude,
                 mode: .threeD, horizontalError: eph, datum: datum, source: "rx", device: device, id: "p\(n)")
    }

    /// Runs positions through the transform and returns everything emitted.
    static func run(_ t: inout GeofenceTransform, _ positions: [Position]) -> [Position] {
        var out = [Position]()
        for p in positions { t.process(p, into: &out) }
        t.finish(into: &out)
        return out
    }

    static func events(_ out: [Position]) -> [String] {
        out.compactMap { p in p.event.map { "\($0.kind.rawValue):\($0.fenceId ?? "")" } }
    }
}
