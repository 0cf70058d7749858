import GatewayCore

/// Options of the `set` transform.
public struct SetConfiguration: Sendable, Hashable {
    /// Attributes added to every position.
    public var attributes = SetPlugin.attributes.defaultValue
    /// Device id set on every position.
    public var device: String?
    /// Replace values the position already has (true) or only fill in missing ones.
    public var overwrite = SetPlugin.overwrite.defaultValue

    public init(attributes: [String: String] = SetPlugin.attributes.defaultValue, device: String? = nil, overwrite: Bool = SetPlugin.overwrite.defaultValue) {
        self.attributes = attributes
        self.device = device
        self.overwrite = overwrite
    }
}

/// The `set` transform: static attributes and a device id (values may use `${ENV}`).
public enum SetPlugin: TransformPlugin {
    public static let attributes = Option("attributes", default: [String: String](),
        "Attributes to add, name → value (strings; numbers and booleans are written as text; ${NAME} is substituted).")
    public static let overwrite = Option("overwrite", default: true,
        "Replace a device id or attribute the position already has; false only fills in missing ones.")

    public static let info = PluginInfo(
        type: "set", kind: .transform,
        summary: "Sets static attributes and the device id on every position; values may use ${ENV}.",
        folder: "Filters",
        options: [
            attributes.spec,
            OptionSpec("device", "string", default: "none (unchanged)", "Device id to set, e.g. \"${DEVICE_ID}\" — the upload payload's device/vip id."),
            overwrite.spec,
        ],
        sample: #"{ "type": "set", "inputs": ["receiver"], "device": "${DEVICE_ID:-unit-1}", "attributes": { "fleet": "north", "vip": "${VIP_ID:-0}" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> SetConfiguration {
        var c = SetConfiguration()
        c.attributes = options.read(attributes)
        c.device = options.string("device")
        if c.device?.isEmpty == true { options.report("device", "must not be empty") }
        c.overwrite = options.read(overwrite)
        if c.attributes.isEmpty && c.device == nil {
            options.report("", "set needs \"attributes\" or \"device\" (it would change nothing)")
        }
        return c
    }

    public static func makeTransform(_ configuration: SetConfiguration, context: ComponentContext) throws -> any PositionTransform {
        SetTransform(configuration: configuration)
    }
}

/// Writes the configured device id and attributes into every position.
public struct SetTransform: PositionTransform {
    public let configuration: SetConfiguration
    /// The attributes of the last position changed and what they became: positions of one
    /// stream mostly arrive with the same attributes (often none), and then share the result's
    /// storage instead of each building its own dictionary.
    private var last: (input: [String: String], output: [String: String])?

    public init(configuration: SetConfiguration) { self.configuration = configuration }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        var p = position
        apply(to: &p)
        output.append(p)
    }

    public mutating func process(batch: inout [Position]) {
        for i in batch.indices { apply(to: &batch[i]) }
    }

    private mutating func apply(to p: inout Position) {
        if let device = configuration.device, configuration.overwrite || p.device == nil {
            p.device = device
        }
        guard !configuration.attributes.isEmpty else { return }
        if let last, last.input == p.attributes {
            p.attributes = last.output
            return
        }
        let input = p.attributes
        for (k, v) in configuration.attributes where configuration.overwrite || p.attributes[k] == nil {
            p.attributes[k] = v
        }
        last = (input, p.attributes)
    }
}
