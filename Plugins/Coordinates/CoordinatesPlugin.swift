import GatewayCore
import Geodesy

/// What the `coordinates` transform converts to.
public enum CoordinateTarget: Sendable, Hashable {
    /// WGS84, GCJ-02 or BD-09 latitude/longitude.
    case geographic(ChinaDatums.Datum)
    /// A projected CRS through PROJ, by EPSG code.
    case projected(epsg: Int)

    /// The datum a converted position is labelled with.
    public var datum: Datum {
        switch self {
        case .geographic(let d): CoordinatesTransform.datum(of: d)
        case .projected(let code): Datum(name: "EPSG:\(code)")
        }
    }
}

/// Options of the `coordinates` transform.
public struct CoordinatesConfiguration: Sendable, Hashable {
    /// The datum input positions are expected in; nil for "whatever each position says".
    public var from: ChinaDatums.Datum?
    public var to: CoordinateTarget = .geographic(.gcj02)
    public var chinaBounds = CoordinatesPlugin.chinaBounds.defaultValue

    public init(from: ChinaDatums.Datum? = nil, to: CoordinateTarget = .geographic(.gcj02), chinaBounds: ChinaBounds = CoordinatesPlugin.chinaBounds.defaultValue) {
        self.from = from
        self.to = to
        self.chinaBounds = chinaBounds
    }
}

/// The `coordinates` transform: WGS84 ↔ GCJ-02 ↔ BD-09, and projections to any EPSG CRS through PROJ.
public enum CoordinatesPlugin: TransformPlugin {
    public static let chinaBounds = Option("china_bounds", default: ChinaBounds.box,
        "Where the GCJ-02 shift applies: \"box\" = 72.004…137.8347 E, 0.8293…55.8271 N (identity outside); \"none\" = everywhere.")

    public static let info = PluginInfo(
        type: "coordinates", kind: .transform,
        summary: "Converts positions between WGS84, GCJ-02 and BD-09, or projects them to an EPSG CRS (x/y metres) through PROJ.",
        folder: "Coordinates",
        options: [
            OptionSpec("to", "wgs84 | gcj02 | bd09 | EPSG:<code>", required: true, "Target datum, or a projected CRS (e.g. \"EPSG:32650\", \"EPSG:3857\") whose easting/northing in metres go to x/y."),
            OptionSpec("from", "wgs84 | gcj02 | bd09", default: "each position's own datum", "Datum the input is expected in; a position saying otherwise is reported (once per source) and converted from what it says."),
            chinaBounds.spec,
        ],
        sample: #"{ "type": "coordinates", "inputs": ["receiver"], "from": "wgs84", "to": "gcj02", "china_bounds": "box" }"#
    )

    public static func configure(_ options: inout OptionReader) -> CoordinatesConfiguration {
        var c = CoordinatesConfiguration()
        if let text = options.requiredString("to") {
            if let target = target(parsing: text) {
                c.to = target
                if case .projected(let code) = target {
                    // Checked here so `locgate validate` catches unknown codes and geographic CRSs.
                    do {
                        let t = try ProjTransformer(source: "EPSG:4326", target: "EPSG:\(code)")
                        if !t.targetIsProjected {
                            options.report("to", "EPSG:\(code) (\(t.targetName)) is not a projected CRS; geographic targets are \"wgs84\", \"gcj02\" and \"bd09\"")
                        }
                    } catch {
                        options.report("to", "EPSG:\(code) is not usable: \(error.message)")
                    }
                }
            } else {
                options.report("to", "expected \"wgs84\", \"gcj02\", \"bd09\" or \"EPSG:<code>\", got \"\(text)\"\(Suggestion.hint(for: text, among: ["wgs84", "gcj02", "bd09"]))")
            }
        }
        if let text = options.string("from") {
            if case .geographic(let d)? = target(parsing: text) {
                c.from = d
            } else {
                options.report("from", "expected \"wgs84\", \"gcj02\" or \"bd09\", got \"\(text)\"\(Suggestion.hint(for: text, among: ["wgs84", "gcj02", "bd09"]))")
            }
        }
        c.chinaBounds = options.read(chinaBounds)
        return c
    }

    /// Parses `wgs84`, `gcj02`, `bd09` (with the spellings `Datum(parsing:)` accepts) or `EPSG:<code>`.
    static func target(parsing text: String) -> CoordinateTarget? {
        guard let d = Datum(parsing: text) else { return nil }
        if let code = d.epsgCode { return .projected(epsg: code) }
        guard let g = CoordinatesTransform.chinaDatum(of: d) else { return nil }
        return .geographic(g)
    }

    public static func makeTransform(_ configuration: CoordinatesConfiguration, context: ComponentContext) throws -> any PositionTransform {
        try CoordinatesTransform(configuration: configuration, context: context)
    }
}
