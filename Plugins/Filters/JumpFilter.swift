import GatewayCore
import Geodesy

/// Options of the `jump_filter` transform.
public struct JumpFilterConfiguration: Sendable, Hashable {
    /// Metres per second: a position implying more from the last good one is a jump.
    public var maxSpeed = JumpFilterPlugin.maxSpeed.defaultValue
    /// After this many consecutive rejects the filter starts afresh.
    public var resetAfter = JumpFilterPlugin.resetAfter.defaultValue
    /// Positions older than the device's newest: passed on marked or dropped, never judged.
    public var late = LateFixes()

    public init(maxSpeed: Double = JumpFilterPlugin.maxSpeed.defaultValue, resetAfter: Int = JumpFilterPlugin.resetAfter.defaultValue, late: LateFixes = LateFixes()) {
        self.maxSpeed = maxSpeed
        self.resetAfter = resetAfter
        self.late = late
    }
}

/// The `jump_filter` transform: drops multipath jumps by implied speed.
public enum JumpFilterPlugin: TransformPlugin {
    public static let maxSpeed = Option("max_speed", default: 70.0, in: 0.001...1e6,
        "Metres per second: the highest plausible speed from the last good position (geodesic distance over the positions' time difference).")
    public static let resetAfter = Option("reset_after", default: 5, in: 1...1_000_000,
        "After this many consecutive rejects the last good position is forgotten and the next position is accepted as a new start (a real relocation).")

    public static let info = PluginInfo(
        type: "jump_filter", kind: .transform,
        summary: "Drops a position implying a speed above max_speed from the device's last good one; resets after reset_after consecutive rejects.",
        folder: "Filters",
        options: [maxSpeed.spec, resetAfter.spec] + LateFixes.options,
        sample: #"{ "type": "jump_filter", "inputs": ["receiver"], "max_speed": 50, "reset_after": 5 }"#
    )

    public static func configure(_ options: inout OptionReader) -> JumpFilterConfiguration {
        var c = JumpFilterConfiguration()
        c.maxSpeed = options.read(maxSpeed)
        c.resetAfter = options.read(resetAfter)
        c.late = LateFixes(options: &options)
        return c
    }

    public static func makeTransform(_ configuration: JumpFilterConfiguration, context: ComponentContext) throws -> any PositionTransform {
        JumpFilterTransform(configuration: configuration, stats: context.stats)
    }
}

/// Per device, keeps the last good position and drops what would need more than `maxSpeed` to reach.
///
/// A device's first position is good. Positions without coordinates pass untouched (nothing to
/// judge). A position without time, or whose time went backwards by more than `late_limit` (a
/// replay restarting), is accepted as a new start. Two positions at the same time in different
/// places imply an infinite speed and the second is rejected. After `resetAfter` consecutive
/// rejects the last good position is forgotten (counted as `resets`), so the next position is
/// accepted. A position older than the device's newest, good or rejected (late, see
/// ``LateFixes``), is not judged: it is passed on marked or dropped, and changes neither the
/// last good position nor the count of rejects.
public struct JumpFilterTransform: DeviceTableTransform {
    public let configuration: JumpFilterConfiguration
    private let drops: DropCounter
    private let stats: ComponentStats

    public struct DeviceState: Sendable {
        /// Nil after a reset: the next position is a new start.
        var lastGood: GeoPoint?
        var lastGoodTime: Timestamp?
        var rejects: Int
        /// The newest time taken, good or rejected; kept across a reset, so a late position
        /// right after one is still late.
        var newest: Timestamp?
    }
    /// Per-device state (``DeviceTableTransform``: changes, snapshots and restoring come from the table).
    public var devices = DeviceTable<DeviceState>()

    public init(configuration: JumpFilterConfiguration, stats: ComponentStats) {
        self.configuration = configuration
        self.stats = stats
        self.drops = DropCounter(stats: stats)
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        guard let point = position.geoPoint else {
            output.append(position)
            return
        }
        let key = position.deviceKey
        let previous = devices[key]
        if configuration.late.judge(position, newest: previous?.newest) == .late {
            configuration.late.handle(position, stats: stats, into: &output)
            return
        }
        let newest = position.time ?? previous?.newest
        if var state = previous, let good = state.lastGood, let time = position.time, let last = state.lastGoodTime, time >= last {
            let distance = Geodesic.distance(from: good, to: point)
            let dt = time.seconds(since: last)
            let tooFast = dt > 0 ? distance / dt > configuration.maxSpeed : distance > 0
            if tooFast {
                drops.drop("jump")
                state.rejects += 1
                state.newest = newest
                if state.rejects >= configuration.resetAfter {
                    stats.count("resets")
                    state = DeviceState(lastGood: nil, lastGoodTime: nil, rejects: 0, newest: newest)
                }
                devices[key] = state
                return
            }
        }
        devices[key] = DeviceState(lastGood: point, lastGoodTime: position.time, rejects: 0, newest: newest)
        output.append(position)
    }

    // MARK: - State (kept across restarts: the last good point and time, the rejects since, the newest time)

    public var stateFormat: String { "jump_filter/1" }

    public func write(_ d: DeviceState, to w: inout SnapshotWriter) {
        w.set("lat", d.lastGood?.latitude)
        w.set("lon", d.lastGood?.longitude)
        w.set("good_time", d.lastGoodTime)
        w.set("rejects", d.rejects)
        w.set("newest", d.newest)
    }

    public func value(from r: SnapshotReader) throws(StateSnapshotError) -> DeviceState {
        let lat = try r.double("lat"), lon = try r.double("lon")
        if (lat == nil) != (lon == nil) { throw StateSnapshotError("lat without lon") }
        let good = lat.flatMap { la in lon.map { GeoPoint(latitude: la, longitude: $0) } }
        return DeviceState(lastGood: good, lastGoodTime: try r.time("good_time"), rejects: try r.int("rejects") ?? 0,
                           newest: try r.time("newest"))
    }
}
