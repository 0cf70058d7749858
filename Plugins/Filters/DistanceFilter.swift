import GatewayCore
import Geodesy

/// Options of the `distance_filter` transform.
public struct DistanceFilterConfiguration: Sendable, Hashable {
    /// Metres a position must be from the last passed one (geodesic distance on WGS84).
    public var minDistance = DistanceFilterPlugin.minDistance.defaultValue
    /// Pass one position every this long while stationary; nil = never.
    public var heartbeat: Duration?
    /// A position this long after the device's previous one starts afresh and always passes.
    public var gap = DistanceFilterPlugin.gap.defaultValue
    /// Positions older than the device's newest: passed on marked or dropped, never a reference.
    public var late = LateFixes()

    public init(minDistance: Double = DistanceFilterPlugin.minDistance.defaultValue, heartbeat: Duration? = nil,
                gap: Duration = DistanceFilterPlugin.gap.defaultValue, late: LateFixes = LateFixes()) {
        self.minDistance = minDistance
        self.heartbeat = heartbeat
        self.gap = gap
        self.late = late
    }
}

/// The `distance_filter` transform: passes a position only when it moved, with a heartbeat.
public enum DistanceFilterPlugin: TransformPlugin {
    public static let minDistance = Option("min_distance_m", default: 10.0, in: 0...1e7,
        "Metres (geodesic, WGS84) a position must be from the device's last passed position to pass.")
    /// Zero is off: ``DistanceFilterConfiguration/heartbeat`` is nil then.
    public static let heartbeat = Option("heartbeat", default: Duration.zero, note: "off",
        "While stationary, still pass one position when this long (by the positions' times) has passed since the last one passed.")
    public static let gap = Option("gap", default: Duration.seconds(60), minimum: .milliseconds(1),
        "A position at least this long after the device's previous position (passed or not) always passes: the first fix after an outage.")

    public static let info = PluginInfo(
        type: "distance_filter", kind: .transform,
        summary: "Passes a position only when it moved at least min_distance_m from the last one passed (per device), with a heartbeat while stationary.",
        folder: "Filters",
        options: [minDistance.spec, heartbeat.spec, gap.spec] + LateFixes.options,
        sample: #"{ "type": "distance_filter", "inputs": ["receiver"], "min_distance_m": 10, "heartbeat": "60s", "gap": "60s" }"#
    )

    public static func configure(_ options: inout OptionReader) -> DistanceFilterConfiguration {
        var c = DistanceFilterConfiguration()
        c.minDistance = options.read(minDistance)
        let beat = options.read(heartbeat)
        c.heartbeat = beat > .zero ? beat : nil
        c.gap = options.read(gap)
        c.late = LateFixes(options: &options)
        return c
    }

    public static func makeTransform(_ configuration: DistanceFilterConfiguration, context: ComponentContext) throws -> any PositionTransform {
        DistanceFilterTransform(configuration: configuration, stats: context.stats)
    }
}

/// Passes positions that moved `minDistance` from the device's last passed one.
///
/// Always passes: a device's first position, the first position after a `gap` (or after time
/// went backwards by more than `late_limit` — a replay restarting), a position carrying a
/// geofence `event`, and with a `heartbeat`, one position per heartbeat while stationary. Time
/// is the positions' own, so a replay filters like live input; a position without time can only
/// pass by distance (and is never late).
/// Positions without coordinates (no fix) are dropped as `dropped.no_fix`, unless they carry an event.
/// A position older than the device's newest (late, see ``LateFixes``) is not judged: it is passed
/// on marked or dropped, and neither becomes the reference nor counts for the gap or heartbeat —
/// the on-time positions filter as if it had never come.
public struct DistanceFilterTransform: DeviceTableTransform {
    public let configuration: DistanceFilterConfiguration
    private let drops: DropCounter
    private let stats: ComponentStats

    public struct DeviceState: Sendable {
        var lastPassedPoint: GeoPoint
        var lastPassedTime: Timestamp?
        var lastSeenTime: Timestamp?
    }
    /// Per-device state (``DeviceTableTransform``: changes, snapshots and restoring come from the table).
    public var devices = DeviceTable<DeviceState>()

    public init(configuration: DistanceFilterConfiguration, stats: ComponentStats) {
        self.configuration = configuration
        self.stats = stats
        self.drops = DropCounter(stats: stats)
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        let key = position.deviceKey
        guard let point = position.geoPoint else {
            if position.event != nil { output.append(position) } else { drops.drop("no_fix") }
            return
        }
        let time = position.time
        let previous = devices[key]
        // `lastSeenTime` is the newest time: only on-time positions (and restarts) set it.
        if configuration.late.judge(position, newest: previous?.lastSeenTime) == .late {
            configuration.late.handle(position, stats: stats, into: &output)
            return
        }
        if passes(position, point, previous) {
            devices[key] = DeviceState(lastPassedPoint: point, lastPassedTime: time ?? previous?.lastPassedTime,
                                       lastSeenTime: time ?? previous?.lastSeenTime)
            output.append(position)
        } else {
            if let time { devices[key]?.lastSeenTime = time }
            drops.drop("stationary")
        }
    }

    /// Whether a position passes, counting why when it is not by plain distance.
    private func passes(_ position: Position, _ point: GeoPoint, _ previous: DeviceState?) -> Bool {
        guard let previous else { return true }
        if position.event != nil { return true }
        if let time = position.time, let seen = previous.lastSeenTime {
            let sinceSeen = time.seconds(since: seen)
            if sinceSeen < 0 {
                // Older than the newest by more than `late_limit` (a late one never gets here):
                // time started again, so the device starts afresh.
                stats.count("passed.time_reset")
                return true
            }
            if sinceSeen >= configuration.gap.secondsDouble {
                stats.count("passed.gap")
                return true
            }
        }
        if Geodesic.distance(from: previous.lastPassedPoint, to: point) >= configuration.minDistance { return true }
        if let heartbeat = configuration.heartbeat, let time = position.time, let last = previous.lastPassedTime,
           time.seconds(since: last) >= heartbeat.secondsDouble {
            stats.count("passed.heartbeat")
            return true
        }
        return false
    }

    // MARK: - State (kept across restarts: the last passed point, when it passed, the newest time)

    public var stateFormat: String { "distance_filter/1" }

    public func write(_ d: DeviceState, to w: inout SnapshotWriter) {
        w.set("lat", d.lastPassedPoint.latitude)
        w.set("lon", d.lastPassedPoint.longitude)
        w.set("passed", d.lastPassedTime)
        w.set("seen", d.lastSeenTime)
    }

    public func value(from r: SnapshotReader) throws(StateSnapshotError) -> DeviceState {
        guard let lat = try r.double("lat"), let lon = try r.double("lon") else { throw StateSnapshotError("no lat/lon") }
        return DeviceState(lastPassedPoint: GeoPoint(latitude: lat, longitude: lon), lastPassedTime: try r.time("passed"),
                           lastSeenTime: try r.time("seen"))
    }
}
