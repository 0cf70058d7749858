/// A place other than a local SQLite file where per-device state is kept, chosen by its key in
/// `settings.state` (`"state": {"nats": {…}}`).
///
/// Registered beside the plugins (``PluginRegistry/register(stateBackend:)``) so that the runtime
/// opens a backend through ``DeviceStateStore`` alone: GatewayRuntime never depends on the client
/// library a backend needs (NATS), the module graph stays one way, and a package that adds a
/// backend does so without a fork, as it adds a plugin.
///
/// Implementation requirements:
/// - ``configure(_:)`` reads every option through the reader (problems reported with their JSON
///   paths, `settings.state.<key>.…`) and does no I/O.
/// - ``open(_:settings:context:)`` runs when the pipeline is built, before any source starts: it
///   connects and creates what is missing, and throws what keeps the store from working (the
///   pipeline then does not start: without its state it would report false events).
/// - The store it returns follows ``DeviceStateStore``'s contract; a write another gateway
///   already overwrote fails with ``DeviceStateStoreError/conflict(devices:detail:)``.
public protocol DeviceStateBackend: SendableMetatype {
    associatedtype Configuration: Sendable
    /// The key under `settings.state` that selects this backend (`nats`).
    static var key: String { get }
    /// The backend's options (names without the `state.<key>.` prefix), for the configuration reference.
    static var options: [OptionSpec] { get }
    /// Reads and checks the options; problems go to the reader.
    static func configure(_ options: inout OptionReader) -> Configuration
    /// Where the state is kept, for logs (`nats bucket locgate-state`).
    static func location(of configuration: Configuration) -> String
    /// Opens the store.
    static func open(_ configuration: Configuration, settings: StateSettings, context: StateStoreContext) throws -> any DeviceStateStore
    /// Opens where the gateways sharing this state keep their commands to devices, or nil when
    /// the backend keeps none (commands then go beside the state as a file would). Optional: the
    /// default keeps none.
    static func openCommands(_ configuration: Configuration, context: StateStoreContext) throws -> (any CommandStore)?
}

extension DeviceStateBackend {
    public static func openCommands(_ configuration: Configuration, context: StateStoreContext) throws -> (any CommandStore)? { nil }
}

/// What a state store is opened with.
public struct StateStoreContext: Sendable {
    public var logger: Logger
    public var clock: any GatewayClock

    public init(logger: Logger, clock: any GatewayClock) {
        self.logger = logger
        self.clock = clock
    }
}

/// A backend's options as read, ready to open; equal when the key and the options as written are.
public struct PreparedStateBackend: Sendable, Hashable {
    public let key: String
    public let location: String
    /// The options object as written: a reload compares it to tell a changed backend.
    public let fingerprint: JSONValue
    /// The backend's configuration value, for tests.
    public let configuration: any Sendable
    public let open: @Sendable (StateSettings, StateStoreContext) throws -> any DeviceStateStore
    /// The backend's command store (``DeviceStateBackend/openCommands(_:context:)``).
    public let openCommands: @Sendable (StateStoreContext) throws -> (any CommandStore)?

    public init(key: String, location: String, fingerprint: JSONValue, configuration: any Sendable,
                open: @escaping @Sendable (StateSettings, StateStoreContext) throws -> any DeviceStateStore,
                openCommands: @escaping @Sendable (StateStoreContext) throws -> (any CommandStore)? = { _ in nil }) {
        self.key = key
        self.location = location
        self.fingerprint = fingerprint
        self.configuration = configuration
        self.open = open
        self.openCommands = openCommands
    }

    public static func == (a: PreparedStateBackend, b: PreparedStateBackend) -> Bool {
        a.key == b.key && a.fingerprint == b.fingerprint
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(fingerprint)
    }
}

/// A registered backend, type-erased.
public struct RegisteredStateBackend: Sendable {
    public let key: String
    public let options: [OptionSpec]
    public let prepare: @Sendable (inout OptionReader, JSONValue) -> PreparedStateBackend
}

extension PluginRegistry {
    /// Makes `settings.state.<B.key>` select `backend`.
    public mutating func register<B: DeviceStateBackend>(stateBackend backend: B.Type) {
        add(stateBackend: RegisteredStateBackend(key: B.key, options: B.options) { reader, fingerprint in
            let c = B.configure(&reader)
            return PreparedStateBackend(key: B.key, location: B.location(of: c), fingerprint: fingerprint, configuration: c,
                                        open: { settings, context in try B.open(c, settings: settings, context: context) },
                                        openCommands: { context in try B.openCommands(c, context: context) })
        })
    }
}

/// Why a state store did not write some changes.
///
/// `conflict`: another gateway wrote a device's state since this one read or wrote it (a shared
/// store's compare-and-swap refused the write): two gateways believe they own the device's
/// partition. The store keeps refusing that device's writes, so the other gateway's state stays.
public struct DeviceStateStoreError: Error, Sendable, CustomStringConvertible {
    private enum Code: Sendable { case conflict, unavailable }
    private let code: Code
    /// `transform/device` of every change refused.
    public let devices: [String]
    /// What the store or its server said.
    public let detail: String

    private init(_ code: Code, devices: [String], detail: String) {
        self.code = code
        self.devices = devices
        self.detail = detail
    }

    /// Another gateway wrote these devices' state (`transform/device`) since this one last did.
    public static func conflict(devices: [String], detail: String) -> DeviceStateStoreError {
        DeviceStateStoreError(.conflict, devices: devices, detail: detail)
    }

    /// The store could not be reached or refused the write for another reason.
    public static func unavailable(_ detail: String) -> DeviceStateStoreError {
        DeviceStateStoreError(.unavailable, devices: [], detail: detail)
    }

    public var isConflict: Bool { code == .conflict }

    /// A short text without dynamic values (good for a metric label).
    public var summary: String {
        switch code {
        case .conflict: return "state written by another gateway"
        case .unavailable: return "state store unavailable"
        }
    }

    public var description: String { detail.isEmpty ? summary : "\(summary): \(detail)" }
}
