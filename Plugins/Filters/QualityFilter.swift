import GatewayCore

/// Options of the `quality_filter` transform; nil limits are not checked.
public struct QualityFilterConfiguration: Sendable, Hashable {
    public var minMode = QualityFilterPlugin.minMode.defaultValue
    public var maxHDOP: Double?
    public var minSatellites: Int?
    /// Metres, 1-sigma.
    public var maxHorizontalError: Double?
    public var requireTime = QualityFilterPlugin.requireTime.defaultValue

    public init(minMode: FixMode = QualityFilterPlugin.minMode.defaultValue, maxHDOP: Double? = nil, minSatellites: Int? = nil,
                maxHorizontalError: Double? = nil, requireTime: Bool = QualityFilterPlugin.requireTime.defaultValue) {
        self.minMode = minMode
        self.maxHDOP = maxHDOP
        self.minSatellites = minSatellites
        self.maxHorizontalError = maxHorizontalError
        self.requireTime = requireTime
    }
}

/// The `quality_filter` transform: drops fixes below a quality bar, counting why.
public enum QualityFilterPlugin: TransformPlugin {
    public static let minMode = Option("min_mode", default: FixMode.twoD,
        "Minimum fix mode; a position below it (or without coordinates, unless \"none\") is dropped as dropped.mode.")
    public static let requireTime = Option("require_time", default: true, "Drop positions without a time (dropped.no_time).")

    public static let info = PluginInfo(
        type: "quality_filter", kind: .transform,
        summary: "Drops positions below a quality bar (fix mode, HDOP, satellites, horizontal error, time) and counts each reason.",
        folder: "Filters",
        options: [
            minMode.spec,
            OptionSpec("max_hdop", "number", default: "none (not checked)", "Maximum horizontal dilution of precision; dropped.hdop. A position without HDOP is not judged on it."),
            OptionSpec("min_satellites", "integer", default: "none (not checked)", "Minimum satellites used in the fix; dropped.satellites. A position without a count is not judged on it."),
            OptionSpec("max_horizontal_error", "number", default: "none (not checked)", "Maximum 1-sigma horizontal error in metres; dropped.horizontal_error. A position without one is not judged on it."),
            requireTime.spec,
        ],
        sample: #"{ "type": "quality_filter", "inputs": ["receiver"], "min_mode": "3d", "max_hdop": 5, "min_satellites": 5, "max_horizontal_error": 25, "require_time": true }"#
    )

    public static func configure(_ options: inout OptionReader) -> QualityFilterConfiguration {
        var c = QualityFilterConfiguration()
        c.minMode = options.read(minMode)
        c.maxHDOP = options.optionalDouble("max_hdop", in: 0...100)
        c.minSatellites = options.optionalInt("min_satellites", in: 0...255)
        c.maxHorizontalError = options.optionalDouble("max_horizontal_error", in: 0...1e7)
        c.requireTime = options.read(requireTime)
        return c
    }

    public static func makeTransform(_ configuration: QualityFilterConfiguration, context: ComponentContext) throws -> any PositionTransform {
        QualityFilterTransform(configuration: configuration, stats: context.stats)
    }
}

/// Checks, in order, time, mode, HDOP, satellites and horizontal error; a position is dropped
/// for the first check it fails and counted under that reason only.
public struct QualityFilterTransform: PositionTransform {
    public let configuration: QualityFilterConfiguration
    private let drops: DropCounter

    public init(configuration: QualityFilterConfiguration, stats: ComponentStats) {
        self.configuration = configuration
        self.drops = DropCounter(stats: stats)
    }

    /// The reason a position fails, or nil when it passes.
    public func rejection(of p: Position) -> String? {
        let c = configuration
        if c.requireTime && p.time == nil { return "no_time" }
        if c.minMode > .noFix && (p.mode < c.minMode || !p.hasCoordinates) { return "mode" }
        if let limit = c.maxHDOP, let v = p.hdop, v > limit { return "hdop" }
        if let limit = c.minSatellites, let v = p.satellites, v < limit { return "satellites" }
        if let limit = c.maxHorizontalError, let v = p.horizontalError, v > limit { return "horizontal_error" }
        return nil
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        if passes(position) { output.append(position) }
    }

    public mutating func process(batch: inout [Position]) {
        batch.updateAndFilter { passes($0) }
    }

    /// Whether the position goes on; counts the reason when it does not.
    private func passes(_ position: Position) -> Bool {
        // fix_lost and no_data carry no fix by nature; dropping them would hide what they report.
        if let kind = position.event?.kind, !kind.isFence { return true }
        guard let reason = rejection(of: position) else { return true }
        drops.drop(reason)
        return false
    }
}
