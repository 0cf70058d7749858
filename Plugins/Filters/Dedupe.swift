import GatewayCore

/// Options of the `dedupe` transform.
public struct DedupeConfiguration: Sendable, Hashable {
    /// Positions older than the device's newest: passed on marked or dropped, never compared.
    public var late = LateFixes()

    public init(late: LateFixes = LateFixes()) { self.late = late }
}

/// The `dedupe` transform: drops a position identical in time and place to the device's previous one.
public enum DedupePlugin: TransformPlugin {
    public static let info = PluginInfo(
        type: "dedupe", kind: .transform,
        summary: "Drops a position with the same time, latitude and longitude as the device's previous position.",
        folder: "Filters",
        options: LateFixes.options,
        sample: #"{ "type": "dedupe", "inputs": ["receiver"] }"#
    )

    public static func configure(_ options: inout OptionReader) -> DedupeConfiguration {
        DedupeConfiguration(late: LateFixes(options: &options))
    }

    public static func makeTransform(_ configuration: DedupeConfiguration, context: ComponentContext) throws -> any PositionTransform {
        DedupeTransform(configuration: configuration, stats: context.stats)
    }
}

/// Compares each position with the device's previous one (passed or not): same time and same
/// coordinates (exact, as a receiver or a merge repeats them) is a duplicate (`dropped.duplicate`).
/// Positions carrying a geofence `event` are never dropped: they differ by their event.
/// A position older than the device's newest (late, see ``LateFixes``) is not compared — only
/// the previous position is kept, so a late repeat of an older one cannot be recognised — and
/// does not become the previous one: it is passed on marked or dropped.
public struct DedupeTransform: DeviceTableTransform {
    public let configuration: DedupeConfiguration
    struct Key: Equatable {
        var time: Timestamp?
        var latitude: Double?
        var longitude: Double?
    }
    public struct DeviceState: Sendable {
        var previous: Key
        /// The newest time taken: a position without time replaces `previous` but not this.
        var newest: Timestamp?
    }
    private let drops: DropCounter
    private let stats: ComponentStats
    /// Per-device state (``DeviceTableTransform``: changes, snapshots and restoring come from the table).
    public var devices = DeviceTable<DeviceState>()

    public init(configuration: DedupeConfiguration = DedupeConfiguration(), stats: ComponentStats) {
        self.configuration = configuration
        self.stats = stats
        self.drops = DropCounter(stats: stats)
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        let key = Key(time: position.time, latitude: position.latitude, longitude: position.longitude)
        let device = position.deviceKey
        let state = devices[device]
        if configuration.late.judge(position, newest: state?.newest) == .late {
            configuration.late.handle(position, stats: stats, into: &output)
            return
        }
        if position.event == nil, state?.previous == key {
            drops.drop("duplicate")
            return
        }
        devices[device] = DeviceState(previous: key, newest: position.time ?? state?.newest)
        output.append(position)
    }

    // MARK: - State (kept across restarts: the previous position's time and place, the newest time)

    public var stateFormat: String { "dedupe/1" }

    public func write(_ d: DeviceState, to w: inout SnapshotWriter) {
        w.set("time", d.previous.time)
        w.set("lat", d.previous.latitude)
        w.set("lon", d.previous.longitude)
        w.set("newest", d.newest)
    }

    public func value(from r: SnapshotReader) throws(StateSnapshotError) -> DeviceState {
        DeviceState(previous: Key(time: try r.time("time"), latitude: try r.double("lat"), longitude: try r.double("lon")),
                    newest: try r.time("newest"))
    }
}
