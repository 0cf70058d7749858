import GatewayCore
import Geodesy
import SystemIO
import EnvironmentChecks

/// What the geofence does with positions.
public enum GeofenceAction: String, Sendable, Hashable, CaseIterable {
    /// Pass only positions inside at least one fence (the upload gate).
    case keepInside = "keep_inside"
    /// Pass only positions inside no fence (privacy zones).
    case keepOutside = "keep_outside"
    /// Pass everything, adding the `fences` and `fence_names` attributes.
    case annotate
}

/// Options of a `geofence` transform, as read from the configuration.
public struct GeofenceConfiguration: Sendable {
    /// Where the fences come from.
    public enum Source: Sendable {
        /// A GeoJSON file (absolute path), re-read when it changes.
        case file(String)
        /// Fences given inline in the configuration.
        case inline([Fence])
    }

    /// The fence file or inline fences.
    public var source: Source = .inline([])
    /// Feature property holding the fence id.
    public var idProperty = GeofencePlugin.idProperty.defaultValue
    /// Feature property holding the fence name.
    public var nameProperty = GeofencePlugin.nameProperty.defaultValue
    /// Datum of the fence coordinates; positions are converted into it.
    public var fenceDatum = GeofencePlugin.fenceDatum.defaultValue
    /// Gate or annotate.
    public var action = GeofencePlugin.action.defaultValue
    /// Fence ids that count; nil for all.
    public var only: Set<String>?
    /// Event kinds to emit; empty keeps no device state.
    public var events = GeofencePlugin.events.defaultValue
    /// Hysteresis and dwell settings.
    public var rule = FenceRule(minInside: GeofencePlugin.minInside.defaultValue, minOutside: GeofencePlugin.minOutside.defaultValue)
    /// Border margin in metres for hysteresis.
    public var borderMeters = GeofencePlugin.borderMeters.defaultValue
    /// Positions with a larger horizontal error (metres) trigger no transitions; nil for no limit.
    public var maxHorizontalError: Double?
    /// How often the fence file's modification time is checked; nil for never.
    public var reload: Duration? = GeofencePlugin.reload.defaultValue
    /// Positions older than the device's newest (with `events`): annotated and gated, but they
    /// change no fence state; passed on marked or dropped.
    public var late = LateFixes()

    /// The defaults.
    public init() {}
}

/// The `geofence` transform plugin.
public enum GeofencePlugin: TransformPlugin {
    public static let idProperty = Option("id_property", default: "id",
        "Feature property holding the fence id (falls back to the feature's GeoJSON \"id\"); ids must be unique.")
    public static let nameProperty = Option("name_property", default: "name",
        "Feature property holding the fence name (optional per fence).")
    public static let fenceDatum = Option("fence_datum", default: ChinaDatums.Datum.wgs84,
        "Datum of the fence coordinates; positions in any of the three are converted into it before testing.")
    public static let action = Option("action", default: GeofenceAction.annotate,
        "keep_inside: pass positions inside any counted fence; keep_outside: pass positions inside none; annotate: pass all and add the fences / fence_names attributes.")
    public static let events = Option("events", default: Set<FenceEvent.Kind>(), typeName: "array",
        "Transition events to emit: any of \"enter\", \"exit\", \"dwell\".",
        jsonText: { kinds in JSONValue.array(FenceEvent.Kind.allCases.filter(kinds.contains).map { .string($0.rawValue) }).jsonText },
        read: { key, reader in
            guard let names = reader.stringArray(key) else { return nil }
            var kinds: Set<FenceEvent.Kind> = []
            for (i, name) in names.enumerated() {
                if let kind = FenceEvent.Kind(rawValue: name), kind.isFence { kinds.insert(kind) } else {
                    reader.report("\(key)[\(i)]", "expected \"enter\", \"exit\" or \"dwell\", got \"\(name)\"")
                }
            }
            return kinds
        })
    public static let minInside = threshold("min_inside",
        "Confirmation before an enter: a number of consecutive inside positions, or a duration string (\"30s\") of position time inside.")
    public static let minOutside = threshold("min_outside",
        "Confirmation before an exit: a number of consecutive outside positions, or a duration string of position time outside.")
    public static let borderMeters = Option("border_m", default: 0.0, in: 0...100_000,
        "Hysteresis margin in metres: positions closer than this to a fence's boundary are evidence neither way.")
    public static let reload = Option("reload", default: Duration.seconds(5),
        "How often (wall clock) the fence file's modification time and size are checked; a change reloads it, keeping device state. 0 disables.")

    public static let info = PluginInfo(
        type: "geofence", kind: .transform,
        summary: "Gates or annotates positions by GeoJSON fences (polygons with holes, multipolygons, circles) and emits enter/exit/dwell events.",
        folder: "Geofence",
        options: [
            OptionSpec("fences", "path | object", required: true, "GeoJSON FeatureCollection of Polygon, MultiPolygon, and Point features with a \"radius\" property in metres: a file path (relative to the config file) or the object inline."),
            idProperty.spec,
            nameProperty.spec,
            fenceDatum.spec,
            action.spec,
            OptionSpec("only", "array", default: "all fences", "Fence ids that count; other fences in the file are ignored."),
            events.spec,
            minInside.spec,
            minOutside.spec,
            borderMeters.spec,
            OptionSpec("loiter", "duration", default: "none", "Time inside (position time) after which a dwell event is emitted, once per stay; required for \"dwell\"."),
            OptionSpec("max_horizontal_error", "number", default: "none", "Positions whose horizontal error (eph, metres) exceeds this trigger no transitions (they are still gated and annotated)."),
            reload.spec,
        ] + LateFixes.options,
        sample: #"{ "type": "geofence", "inputs": ["receiver"], "fences": "depots.geojson", "fence_datum": "wgs84", "action": "keep_inside", "events": ["enter", "exit", "dwell"], "min_inside": 2, "min_outside": "10s", "border_m": 15, "loiter": "5m", "max_horizontal_error": 50 }"#
    )

    public static func configure(_ options: inout OptionReader) -> GeofenceConfiguration {
        var c = GeofenceConfiguration()
        c.idProperty = options.read(idProperty)
        c.nameProperty = options.read(nameProperty)
        switch options.value("fences") {
        case .string?:
            c.source = .file(options.filePath("fences") ?? "")
        case .object?:
            if let value = options.value("fences") {
                do {
                    c.source = .inline(try FenceLoader(idProperty: c.idProperty, nameProperty: c.nameProperty).load(value))
                } catch {
                    options.report(error.path.isEmpty ? "fences" : "fences.\(error.path)", error.message)
                }
            }
        case nil:
            options.report("fences", "required option is missing: a GeoJSON file path or an inline FeatureCollection")
        case let other?:
            options.report("fences", "expected a file path or a GeoJSON object, got \(other.kindName)")
        }
        c.fenceDatum = options.read(fenceDatum)
        c.action = options.read(action)
        if let only = options.stringArray("only") {
            if only.isEmpty { options.report("only", "an empty list would count no fence; leave the option out to count all") }
            c.only = Set(only)
        }
        c.events = options.read(events)
        c.rule.minInside = options.read(minInside)
        c.rule.minOutside = options.read(minOutside)
        c.borderMeters = options.read(borderMeters)
        c.rule.loiter = options.duration("loiter")
        if c.events.contains(.dwell) && c.rule.loiter == nil {
            options.report("loiter", "required when events include \"dwell\"")
        }
        c.maxHorizontalError = options.optionalDouble("max_horizontal_error", in: 0...1e9)
        let every = options.read(reload)
        c.reload = every > .zero ? every : nil
        c.late = LateFixes(options: &options)
        return c
    }

    /// `min_inside` and `min_outside`: a count (JSON integer ≥ 1) or a duration (JSON string);
    /// one position by default.
    static func threshold(_ name: String, _ summary: String) -> Option<FenceThreshold> {
        Option(name, default: .positions(1), typeName: "integer | duration", summary,
            jsonText: { threshold in
                switch threshold {
                case .positions(let n): String(n)
                case .duration(let d): OptionText.duration(d)
                }
            },
            read: { key, reader in
                switch reader.value(key) {
                case nil: return nil
                case .number?: return reader.optionalInt(key, in: 1...1_000_000).map(FenceThreshold.positions)
                case .string?: return reader.duration(key).map(FenceThreshold.duration)
                case let other?:
                    reader.report(key, "expected a number of positions or a duration string such as \"30s\", got \(other.kindName)")
                    return nil
                }
            })
    }

    /// The fence file loads exactly as it will at start: it exists, is readable, is GeoJSON, and
    /// every fence has a unique id and a valid shape.
    public static func checkEnvironment(_ configuration: GeofenceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        guard case .file(let path) = configuration.source else { return [] }
        do {
            let fences = try FenceLoader(idProperty: configuration.idProperty, nameProperty: configuration.nameProperty).load(file: path)
            if let only = configuration.only {
                let missing = only.subtracting(fences.map(\.id)).sorted()
                if !missing.isEmpty {
                    return [context.warning("only", "no fence in \(FileCheck.absolute(path)) has the id(s) \(missing.map { "\"\($0)\"" }.joined(separator: ", "))")]
                }
            }
            return [context.info("fences", "\(fences.count) fence(s) in \(FileCheck.absolute(path))")]
        } catch {
            return [context.error("fences", error.description)]
        }
    }

    public static func makeTransform(_ configuration: GeofenceConfiguration, context: ComponentContext) throws -> any PositionTransform {
        try GeofenceTransform(configuration: configuration, context: context)
    }

    /// The fences as views draw them: loaded as the transform loads them (the same file and
    /// properties, `only` applied), in their `fence_datum`.
    public static func areas(of configuration: GeofenceConfiguration) throws -> [Area] {
        var fences: [Fence]
        switch configuration.source {
        case .inline(let inline):
            fences = inline
        case .file(let path):
            fences = try FenceLoader(idProperty: configuration.idProperty, nameProperty: configuration.nameProperty).load(file: path)
        }
        if let only = configuration.only { fences = fences.filter { only.contains($0.id) } }
        let datum: Datum = switch configuration.fenceDatum {
        case .wgs84: .wgs84
        case .gcj02: .gcj02
        case .bd09: .bd09
        }
        return fences.map { Area(id: $0.id, name: $0.name, datum: datum, shape: area($0.shape)) }
    }

    static func area(_ shape: FenceShape) -> Area.Shape {
        func rings(_ polygon: Polygon) -> [[Area.Point]] {
            ([polygon.outer] + polygon.holes).map { ring in ring.points.map { Area.Point(latitude: $0.latitude, longitude: $0.longitude) } }
        }
        switch shape {
        case .circle(let c): return .circle(center: Area.Point(latitude: c.center.latitude, longitude: c.center.longitude), radiusMeters: c.radiusMeters)
        case .polygon(let p): return .polygons([rings(p)])
        case .multiPolygon(let m): return .polygons(m.polygons.map(rings))
        }
    }
}
