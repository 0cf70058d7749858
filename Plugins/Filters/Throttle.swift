import GatewayCore

/// Options of the `throttle` transform.
public struct ThrottleConfiguration: Sendable, Hashable {
    /// At most one position per device per this long.
    public var interval: Duration = .seconds(120)

    public init(interval: Duration = .seconds(120)) { self.interval = interval }
}

/// The `throttle` transform: at most one position per `interval` per device.
public enum ThrottlePlugin: TransformPlugin {
    public static let info = PluginInfo(
        type: "throttle", kind: .transform,
        summary: "Passes at most one position per interval per device (by the positions' times).",
        folder: "Filters",
        options: [
            OptionSpec("interval", "duration", required: true, "Minimum time between two passed positions of one device, by the positions' times (e.g. \"2m\" to store every 2 minutes)."),
        ],
        sample: #"{ "type": "throttle", "inputs": ["receiver"], "interval": "2m" }"#
    )

    public static func configure(_ options: inout OptionReader) -> ThrottleConfiguration {
        var c = ThrottleConfiguration()
        if options.has("interval") {
            c.interval = options.duration("interval", default: .seconds(120), minimum: .milliseconds(1))
        } else {
            options.report("interval", "required option is missing")
        }
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
/// time going backwards (a replay restarting) starts afresh.
public struct ThrottleTransform: PositionTransform {
    public let configuration: ThrottleConfiguration
    private let drops: DropCounter
    private var lastPassed = DeviceTable<Timestamp>()

    public init(configuration: ThrottleConfiguration, stats: ComponentStats) {
        self.configuration = configuration
        self.drops = DropCounter(stats: stats)
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        let key = position.deviceKey
        guard let time = position.time else {
            if position.event != nil { output.append(position) } else { drops.drop("no_time") }
            return
        }
        if position.event == nil, let last = lastPassed[key] {
            let elapsed = time.milliseconds - last.milliseconds
            if elapsed >= 0 && elapsed < configuration.interval.milliseconds {
                drops.drop("throttled")
                return
            }
        }
        lastPassed[key] = time
        output.append(position)
    }
}
