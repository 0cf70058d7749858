import GatewayCore

/// Options of the `throttle` transform.
public struct ThrottleConfiguration: Sendable, Hashable {
    /// At most one position per device per this long.
    public var interval: Duration = .seconds(120)
    /// Positions older than the device's newest: passed on marked or dropped, never restarting the interval.
    public var late = LateFixes()

    public init(interval: Duration = .seconds(120), late: LateFixes = LateFixes()) {
        self.interval = interval
        self.late = late
    }
}

/// The `throttle` transform: at most one position per `interval` per device.
public enum ThrottlePlugin: TransformPlugin {
    public static let info = PluginInfo(
        type: "throttle", kind: .transform,
        summary: "Passes at most one position per interval per device (by the positions' times).",
        folder: "Filters",
        options: [
            OptionSpec("interval", "duration", required: true, "Minimum time between two passed positions of one device, by the positions' times (e.g. \"2m\" to store every 2 minutes)."),
        ] + LateFixes.options,
        sample: #"{ "type": "throttle", "inputs": ["receiver"], "interval": "2m" }"#
    )

    public static func configure(_ options: inout OptionReader) -> ThrottleConfiguration {
        var c = ThrottleConfiguration()
        if options.has("interval") {
            c.interval = options.duration("interval", default: .seconds(120), minimum: .milliseconds(1))
        } else {
            options.report("interval", "required option is missing")
        }
        c.late = LateFixes(options: &options)
        return c
    }

    public static func makeTransform(_ configuration: ThrottleConfiguration, context: ComponentContext) throws -> any PositionTransform {
        ThrottleTransform(configuration: configuration, stats: context.stats)
    }
}

/// Passes a device's position when `interval` has passed since its last passed one.
///
/// Positions carrying a geofence `event` always pass (and restart the interval); positions
/// without time are dropped (`dropped.no_time`) because they cannot be placed in an interval;
/// time going backwards by more than `late_limit` (a replay restarting) starts afresh. A
/// position older than the device's newest (late, see ``LateFixes``) is not judged against the
/// interval: it is passed on marked or dropped, and does not restart the interval.
public struct ThrottleTransform: DeviceTableTransform {
    public let configuration: ThrottleConfiguration
    private let drops: DropCounter
    private let stats: ComponentStats

    public struct DeviceState: Sendable {
        var lastPassed: Timestamp
        /// The newest time taken, passed or throttled: what a late position is older than.
        var newest: Timestamp
    }
    /// Per-device state (``DeviceTableTransform``: changes, snapshots and restoring come from the table).
    public var devices = DeviceTable<DeviceState>()

    public init(configuration: ThrottleConfiguration, stats: ComponentStats) {
        self.configuration = configuration
        self.stats = stats
        self.drops = DropCounter(stats: stats)
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        let key = position.deviceKey
        guard let time = position.time else {
            if position.event != nil { output.append(position) } else { drops.drop("no_time") }
            return
        }
        let state = devices[key]
        if configuration.late.judge(position, newest: state?.newest) == .late {
            configuration.late.handle(position, stats: stats, into: &output)
            return
        }
        if position.event == nil, let last = state?.lastPassed {
            let elapsed = time.milliseconds - last.milliseconds
            if elapsed >= 0 && elapsed < configuration.interval.milliseconds {
                devices[key]?.newest = time
                drops.drop("throttled")
                return
            }
        }
        devices[key] = DeviceState(lastPassed: time, newest: time)
        output.append(position)
    }

    // MARK: - State (kept across restarts: when the device last passed, its newest time)

    public var stateFormat: String { "throttle/1" }

    public func write(_ d: DeviceState, to w: inout SnapshotWriter) {
        w.set("passed", d.lastPassed)
        w.set("newest", d.newest)
    }

    public func value(from r: SnapshotReader) throws(StateSnapshotError) -> DeviceState {
        guard let passed = try r.time("passed"), let newest = try r.time("newest") else { throw StateSnapshotError("no passed/newest time") }
        return DeviceState(lastPassed: passed, newest: newest)
    }
}
