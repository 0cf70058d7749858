/// One documented option of a plugin: the single source of truth for `locgate plugins` and the
/// option table in the plugin's README (a test checks they agree).
public struct OptionSpec: Sendable, Hashable {
    public var name: String
    /// `string`, `number`, `integer`, `boolean`, `duration`, `path`, `array`, `object`, or a list of choices.
    public var type: String
    /// Default as written in JSON, or nil when the option is required or has no default.
    public var defaultValue: String?
    public var required: Bool
    /// What it does, with its unit.
    public var summary: String

    public init(_ name: String, _ type: String, default defaultValue: String? = nil, required: Bool = false, _ summary: String) {
        self.name = name
        self.type = type
        self.defaultValue = defaultValue
        self.required = required
        self.summary = summary
    }
}

/// What a plugin says about itself.
public struct PluginInfo: Sendable {
    /// The `type` string in configurations (snake_case).
    public var type: String
    public var kind: ComponentKind
    /// One line.
    public var summary: String
    public var options: [OptionSpec]
    /// A sample component configuration (a JSON object with `type`, and `inputs` for transforms
    /// and sinks); a test decodes every sample.
    public var sample: String
    /// The plugin's folder under `Plugins/`.
    public var folder: String

    public init(type: String, kind: ComponentKind, summary: String, folder: String, options: [OptionSpec], sample: String) {
        self.type = type
        self.kind = kind
        self.summary = summary
        self.folder = folder
        self.options = options
        self.sample = sample
    }
}

/// A plugin: a configuration type read from JSON and a factory for the running component.
///
/// `configure` reads every option through the reader (which reports problems with their paths
/// and returns defaults so reading continues); it does no I/O. `make…` builds the running
/// component from a configuration that validated cleanly, and may fail for run-time reasons
/// (a file that cannot be opened).
public protocol GatewayPlugin: SendableMetatype {
    associatedtype Configuration: Sendable
    static var info: PluginInfo { get }
    /// Reads and checks the options; problems go to the reader.
    static func configure(_ options: inout OptionReader) -> Configuration
    /// Resources the component claims exclusively (a device path, a listening port): two
    /// components claiming one resource is a configuration error.
    static func claims(of configuration: Configuration) -> [String]
    /// Checks what the component needs from the machine before anything starts (`locgate
    /// validate`): files it reads exist and parse, directories it writes are writable, peers
    /// answer. It has no side effects (it creates, truncates and locks nothing).
    ///
    /// Implementation requirements:
    /// - Use the same code the component uses when it is built or started (the fence loader, the
    ///   queue's directory check), so `validate` and `run` cannot disagree: what `run` would
    ///   refuse is an `.error`; what may fix itself (a peer that is down, a port not plugged in)
    ///   is a `.warning`.
    /// - A file finding names the resolved absolute path and the system's reason (`strerror`).
    /// - Probe peers within `context.peerTimeout`.
    static func checkEnvironment(_ configuration: Configuration, context: EnvironmentContext) -> [EnvironmentFinding]
}

// MARK: - Default implementations

extension GatewayPlugin {
    public static func claims(of configuration: Configuration) -> [String] { [] }
    public static func checkEnvironment(_ configuration: Configuration, context: EnvironmentContext) -> [EnvironmentFinding] { [] }
}

public protocol SourcePlugin: GatewayPlugin {
    static func makeSource(_ configuration: Configuration, context: ComponentContext) throws -> any PositionSource
    /// Whether the source keeps per-device state in the state store (`settings.state`), which
    /// its ``ComponentContext/stateStore`` then holds. Optional: the default keeps none.
    static func keepsState(_ configuration: Configuration) -> Bool
    /// Whether the source carries commands to its devices (its ``ComponentContext/commands``).
    /// Optional: the default carries none.
    static func carriesCommands(_ configuration: Configuration) -> Bool
}

extension SourcePlugin {
    public static func keepsState(_ configuration: Configuration) -> Bool { false }
    public static func carriesCommands(_ configuration: Configuration) -> Bool { false }
}

public protocol TransformPlugin: GatewayPlugin {
    static func makeTransform(_ configuration: Configuration, context: ComponentContext) throws -> any PositionTransform
    /// The areas the transform works with (fences, corridors), for views such as the live map.
    /// Optional: the default has none. May read files (as the transform would when it starts);
    /// a failure is shown beside the view, not raised.
    static func areas(of configuration: Configuration) throws -> [Area]
}

extension TransformPlugin {
    public static func areas(of configuration: Configuration) throws -> [Area] { [] }
}

public protocol SinkPlugin: GatewayPlugin {
    static func makeSink(_ configuration: Configuration, context: ComponentContext) throws -> any PositionSink
    /// Whether upstream waits for the sink to persist each batch (sinks with a durable queue).
    static func isDurable(_ configuration: Configuration) -> Bool
    /// Whether the sink submits commands to devices (its ``ComponentContext/commands``).
    /// Optional: the default submits none.
    static func submitsCommands(_ configuration: Configuration) -> Bool
    /// Where the per-device state file goes when `settings.state.path` is not given: beside the
    /// sink's durable queue file (``StateSettings/path(besideQueue:)``); nil for a sink without one.
    static func stateStorePath(of configuration: Configuration) -> String?
}

extension SinkPlugin {
    public static func isDurable(_ configuration: Configuration) -> Bool { false }
    public static func submitsCommands(_ configuration: Configuration) -> Bool { false }
    public static func stateStorePath(of configuration: Configuration) -> String? { nil }
}

/// A running component, as built from a configuration.
public enum BuiltComponent: Sendable {
    case source(any PositionSource)
    case transform(any PositionTransform)
    case sink(any PositionSink)
}

/// A component whose options were read; `build` makes the running component.
public struct PreparedComponent: Sendable {
    public let claims: [String]
    /// For sinks: upstream waits for the sink's acknowledgement.
    public let durable: Bool
    /// For sources: it keeps per-device state in the state store (``SourcePlugin/keepsState(_:)``).
    public let keepsState: Bool
    /// It carries (a source) or submits (a sink) commands to devices.
    public let usesCommands: Bool
    /// For sinks: ``SinkPlugin/stateStorePath(of:)``.
    public let stateStorePath: String?
    public let build: @Sendable (ComponentContext) throws -> BuiltComponent
    /// The plugin's configuration value as read, for tests that compare what an option's
    /// documented default does with what leaving the option out does.
    public let configuration: (any Sendable)?

    /// The plugin's environment check (``GatewayPlugin/checkEnvironment(_:context:)``).
    public let checkEnvironment: @Sendable (EnvironmentContext) -> [EnvironmentFinding]
    /// The component's areas (``TransformPlugin/areas(of:)``); none for sources and sinks.
    public let areas: @Sendable () throws -> [Area]

    public init(claims: [String] = [], durable: Bool = false, keepsState: Bool = false, usesCommands: Bool = false, stateStorePath: String? = nil,
                configuration: (any Sendable)? = nil,
                checkEnvironment: @escaping @Sendable (EnvironmentContext) -> [EnvironmentFinding] = { _ in [] },
                areas: @escaping @Sendable () throws -> [Area] = { [] },
                build: @escaping @Sendable (ComponentContext) throws -> BuiltComponent) {
        self.claims = claims
        self.durable = durable
        self.keepsState = keepsState
        self.usesCommands = usesCommands
        self.stateStorePath = stateStorePath
        self.configuration = configuration
        self.checkEnvironment = checkEnvironment
        self.areas = areas
        self.build = build
    }
}

/// A registered plugin, type-erased.
public struct RegisteredPlugin: Sendable {
    public let info: PluginInfo
    public let prepare: @Sendable (inout OptionReader) -> PreparedComponent
}

/// Every plugin type the process knows, by kind and `type` string.
public struct PluginRegistry: Sendable {
    private var plugins: [String: RegisteredPlugin] = [:]
    /// Places other than SQLite for per-device state, by their key in `settings.state`.
    private var backends: [String: RegisteredStateBackend] = [:]

    public init() {}

    mutating func add(stateBackend backend: RegisteredStateBackend) {
        precondition(backends[backend.key] == nil && backend.key != "path", "state backend \(backend.key) registered twice")
        backends[backend.key] = backend
    }

    /// Every registered state backend, sorted by key.
    public var stateBackends: [RegisteredStateBackend] { backends.values.sorted { $0.key < $1.key } }

    private static func key(_ kind: ComponentKind, _ type: String) -> String { "\(kind.rawValue)/\(type)" }

    public mutating func register<P: SourcePlugin>(source plugin: P.Type) {
        add(P.info) { reader in
            let c = P.configure(&reader)
            return PreparedComponent(claims: P.claims(of: c), durable: false, keepsState: P.keepsState(c), usesCommands: P.carriesCommands(c), configuration: c,
                                     checkEnvironment: { P.checkEnvironment(c, context: $0) }) { ctx in .source(try P.makeSource(c, context: ctx)) }
        }
    }

    public mutating func register<P: TransformPlugin>(transform plugin: P.Type) {
        add(P.info) { reader in
            let c = P.configure(&reader)
            return PreparedComponent(claims: P.claims(of: c), durable: false, configuration: c, checkEnvironment: { P.checkEnvironment(c, context: $0) },
                                     areas: { try P.areas(of: c) }) { ctx in .transform(try P.makeTransform(c, context: ctx)) }
        }
    }

    public mutating func register<P: SinkPlugin>(sink plugin: P.Type) {
        add(P.info) { reader in
            let c = P.configure(&reader)
            return PreparedComponent(claims: P.claims(of: c), durable: P.isDurable(c), usesCommands: P.submitsCommands(c),
                                     stateStorePath: P.stateStorePath(of: c), configuration: c,
                                     checkEnvironment: { P.checkEnvironment(c, context: $0) }) { ctx in .sink(try P.makeSink(c, context: ctx)) }
        }
    }

    private mutating func add(_ info: PluginInfo, prepare: @escaping @Sendable (inout OptionReader) -> PreparedComponent) {
        precondition(plugins[PluginRegistry.key(info.kind, info.type)] == nil, "plugin \(info.kind.rawValue) \(info.type) registered twice")
        plugins[PluginRegistry.key(info.kind, info.type)] = RegisteredPlugin(info: info, prepare: prepare)
    }

    public func plugin(kind: ComponentKind, type: String) -> RegisteredPlugin? {
        plugins[PluginRegistry.key(kind, type)]
    }

    /// All plugins of a kind, sorted by type.
    public func plugins(of kind: ComponentKind) -> [RegisteredPlugin] {
        plugins.values.filter { $0.info.kind == kind }.sorted { $0.info.type < $1.info.type }
    }

    /// All plugins: sources, transforms, sinks, each sorted by type.
    public var all: [RegisteredPlugin] { ComponentKind.allCases.flatMap { plugins(of: $0) } }
}
