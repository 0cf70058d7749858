import GatewayCore

/// Options of the `dedupe` transform (it has none).
public struct DedupeConfiguration: Sendable, Hashable {
    public init() {}
}

/// The `dedupe` transform: drops a position identical in time and place to the device's previous one.
public enum DedupePlugin: TransformPlugin {
    public static let info = PluginInfo(
        type: "dedupe", kind: .transform,
        summary: "Drops a position with the same time, latitude and longitude as the device's previous position.",
        folder: "Filters",
        options: [],
        sample: #"{ "type": "dedupe", "inputs": ["receiver"] }"#
    )

    public static func configure(_ options: inout OptionReader) -> DedupeConfiguration { DedupeConfiguration() }

    public static func makeTransform(_ configuration: DedupeConfiguration, context: ComponentContext) throws -> any PositionTransform {
        DedupeTransform(stats: context.stats)
    }
}

/// Compares each position with the device's previous one (passed or not): same time and same
/// coordinates (exact, as a receiver or a merge repeats them) is a duplicate (`dropped.duplicate`).
/// Positions carrying a geofence `event` are never dropped: they differ by their event.
public struct DedupeTransform: PositionTransform {
    private struct Key: Equatable {
        var time: Timestamp?
        var latitude: Double?
        var longitude: Double?
    }
    private let drops: DropCounter
    private var previous = DeviceTable<Key>()

    public init(stats: ComponentStats) {
        self.drops = DropCounter(stats: stats)
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        let key = Key(time: position.time, latitude: position.latitude, longitude: position.longitude)
        let device = position.deviceKey
        if position.event == nil, previous[device] == key {
            drops.drop("duplicate")
            return
        }
        previous[device] = key
        output.append(position)
    }
}
