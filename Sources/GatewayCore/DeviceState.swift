/// A transform whose per-device state outlives the process: the runtime restores it at start
/// and saves what changed once the positions that changed it are acknowledged end to end.
///
/// What a transform keeps per device (inside/outside a fence, the last passed fix, the newest
/// time) is lost with the process otherwise, and a restart then reports a device already inside
/// a fence as entering again. The runtime works with one device's state at a time, as a JSON
/// value the transform writes and reads back (``snapshot(device:)``, ``restore(device:from:)``),
/// so the store never needs to know a transform's types and `locgate state show` can print it.
///
/// The contract (Docs/Plugins.md, "Per-device state"):
/// - ``recordStateChanges()`` is called once, after restoring, when a store is configured; from
///   then on the transform remembers which devices' state it changed (``DeviceTable`` does it).
/// - After each batch (and each tick), the runtime takes ``takeChangedDevices()`` and the
///   snapshot of each; a nil snapshot means the transform keeps nothing for the device (forget it).
/// - ``stateFormat`` names the snapshot's layout: a stored snapshot of another format is not
///   restored (the device starts afresh, logged). Change it when the layout changes incompatibly.
/// - Snapshots are small (tens of bytes to a few hundred): a device's state, not its history.
public protocol StatefulTransform: PositionTransform {
    /// Whether this instance keeps per-device state at all (a geofence without events does not).
    var keepsState: Bool { get }
    /// The layout of the snapshots, e.g. `geofence/1`.
    var stateFormat: String { get }
    /// Starts remembering which devices' state changes.
    mutating func recordStateChanges()
    /// The devices whose state changed since the last call, each once; forgets them.
    mutating func takeChangedDevices() -> [String]
    /// One device's state, or nil when nothing is kept for it.
    func snapshot(device: String) -> JSONValue?
    /// Takes one device's state from a snapshot of ``stateFormat``; throws when it cannot be read.
    mutating func restore(device: String, from snapshot: JSONValue) throws(StateSnapshotError)
}

extension DeviceStateStore {
    public func writeLazily(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void) {
        write(changes, sequence: sequence, completion: completion)
    }
}

extension StatefulTransform {
    public var keepsState: Bool { true }

    public mutating func takeStateChanges() -> [(device: String, state: JSONValue?)] {
        let devices = takeChangedDevices()
        guard !devices.isEmpty else { return [] }
        return devices.map { ($0, snapshot(device: $0)) }
    }
}

/// A snapshot a transform cannot read back.
public struct StateSnapshotError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One device's state as one transform saved it (``StatefulTransform``).
public struct DeviceStateRecord: Sendable, Hashable {
    /// The transform's id in the configuration.
    public var transform: String
    public var device: String
    /// ``StatefulTransform/stateFormat`` of the transform that wrote it.
    public var format: String
    /// The state; nil in a change means "forget this device".
    public var state: JSONValue?
    /// When it was written (milliseconds since the epoch); 0 in a change (the store stamps it).
    public var updatedMilliseconds: Int64

    public init(transform: String, device: String, format: String, state: JSONValue?, updatedMilliseconds: Int64 = 0) {
        self.transform = transform
        self.device = device
        self.format = format
        self.state = state
        self.updatedMilliseconds = updatedMilliseconds
    }
}

/// Where per-device state is kept (`settings.state`): the runtime restores from it at start and
/// writes changes to it off the pipeline's threads.
public protocol DeviceStateStore: Sendable {
    /// Every record of one transform (at start and when a reload builds the transform anew).
    func load(transform: String) throws -> [DeviceStateRecord]
    /// One device's record of one transform, or nil (a shared store another gateway wrote to since
    /// this one loaded). The default reads every record of the transform.
    func load(transform: String, device: String) throws -> DeviceStateRecord?
    /// Writes `changes` (a nil state deletes) and calls `completion` once they are durable, or
    /// with the error that kept them from being written. `sequence` orders the writes of one
    /// transform: a change older than what is stored for its device is skipped (two batches
    /// whose acknowledgements came in the other order).
    func write(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void)
    /// `write` for changes nobody waits for (from sources that cannot replay): the store may
    /// gather them for a while (a fraction of a second) before it writes.
    func writeLazily(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void)
    /// Waits for pending writes and closes the store.
    func close()
    /// Where it is, for logs (`/var/lib/locgate/state-http.db`).
    var location: String { get }
    /// Devices and bytes of state stored for one transform (the gauges `state.devices` and
    /// `state.bytes`), or nil when the store does not keep count.
    func totals(transform: String) -> (devices: Int, bytes: Int)?
}

// MARK: - Default implementations

extension DeviceStateStore {
    public func totals(transform: String) -> (devices: Int, bytes: Int)? { nil }
    public func load(transform: String, device: String) throws -> DeviceStateRecord? {
        try load(transform: transform).first { $0.device == device }
    }
}

/// `settings.state`: where per-device state is kept.
public struct StateSettings: Sendable, Hashable {
    public static let intervalOption = Option("state.interval", default: Duration.zero,
        "Gather state writes for up to this long into one transaction; acknowledgements upstream wait for them. 0: written as soon as each batch is acknowledged.")
    public static let maxAgeOption = Option("state.max_age", default: Duration.seconds(30 * 86_400), minimum: .seconds(1),
        "A device's state not written for this long is forgotten (at start and hourly; with state.nats, the bucket's TTL when locgate creates it).")

    /// The SQLite file; nil: beside the first durable queue, or in memory only when there is none.
    public var path: String?
    /// Another place than an SQLite file (`"nats": {…}`: a JetStream Key-Value bucket shared by
    /// partitioned aggregators); exclusive with `path`.
    public var backend: PreparedStateBackend?
    /// Writes wait up to this long to be gathered into one transaction (and the acknowledgements
    /// upstream with them); zero: each batch's changes are written as soon as it is acknowledged.
    public var interval = StateSettings.intervalOption.defaultValue
    /// State not written for this long is forgotten.
    public var maxAge = StateSettings.defaultMaxAge
    /// `max_age`'s default: 30 days.
    public static var defaultMaxAge: Duration { maxAgeOption.defaultValue }
    /// `"state": null`: in memory only, whatever the queues.
    public var disabled = false

    public init(path: String? = nil, interval: Duration = StateSettings.intervalOption.defaultValue, maxAge: Duration = StateSettings.defaultMaxAge,
                disabled: Bool = false) {
        self.path = path
        self.interval = interval
        self.maxAge = maxAge
        self.disabled = disabled
    }

    /// The options of `settings.state`, for the configuration reference (a registered backend's
    /// own options are ``RegisteredStateBackend/options``, below `state.<key>`).
    public static let options: [OptionSpec] = [
        OptionSpec("state", "object | null", default: "{} (beside the first durable queue)", "Where stateful transforms (geofence events, distance_filter, throttle, dedupe, jump_filter) and the jt808 source (its terminals' authentication codes) keep per-device state across restarts; null: in memory only."),
        OptionSpec("state.path", "path", default: "state-<queue file> beside the first durable queue", "SQLite file of the state store; without it and without a durable queue, state is kept in memory only (logged at start)."),
        OptionSpec("state.nats", "object", default: "none", "Keep the state in a NATS JetStream Key-Value bucket instead of a file, shared by partitioned aggregators so a partition moved to another aggregator takes its devices' state along (options below); exclusive with state.path."),
        intervalOption.spec,
        maxAgeOption.spec,
    ]

    /// Reads `settings.state` (the reader is at `settings`); `registry` knows the backends besides SQLite.
    public static func read(_ settings: inout OptionReader, registry: PluginRegistry = PluginRegistry()) -> StateSettings {
        var result = StateSettings()
        guard settings.has("state") else { return result }
        guard var s = settings.object("state") else {
            // Present and null (anything else is reported by `object`).
            result.disabled = settings.value("state") == nil
            return result
        }
        result.path = s.filePath("path")
        for backend in registry.stateBackends where s.has(backend.key) {
            guard let raw = s.value(backend.key), var o = s.object(backend.key) else { continue }
            if let other = result.backend {
                s.report(backend.key, "give one place for the state, not both state.\(other.key) and state.\(backend.key)")
                continue
            }
            result.backend = backend.prepare(&o, raw)
            o.finish()
        }
        if let backend = result.backend, result.path != nil {
            s.report("path", "give either state.path (an SQLite file) or state.\(backend.key), not both")
            s.report(backend.key, "give either state.\(backend.key) or state.path (an SQLite file), not both")
        }
        result.interval = s.read(intervalOption)
        result.maxAge = s.read(maxAgeOption)
        s.finish()
        return result
    }
}

extension PipelineConfiguration {
    /// The state store's file: `settings.state.path`, else the one the first sink with a durable
    /// queue declares (``SinkPlugin/stateStorePath(of:)``: `state-<name>` beside its queue file);
    /// nil when state is kept in memory only or in a backend (`state.nats`).
    public var stateStorePath: String? {
        let state = settings.state
        if state.disabled || state.backend != nil { return nil }
        if let path = state.path { return path }
        return sinks.lazy.compactMap(\.prepared.stateStorePath).first
    }
}

extension StateSettings {
    /// The state file beside a durable queue file: `state-<name>` in its directory.
    public static func path(besideQueue queue: String) -> String {
        let slash = queue.lastIndex(of: "/")
        let directory = slash.map { String(queue[...$0]) } ?? ""
        let name = slash.map { String(queue[queue.index(after: $0)...]) } ?? queue
        return directory + "state-" + name
    }
}

/// Builds a snapshot object for ``StatefulTransform/snapshot(device:)``: members in the order
/// written; nil values are left out (a missing member reads back as nil).
public struct SnapshotWriter {
    private var members: [(String, JSONValue)] = []

    public init() {}

    public mutating func set(_ key: String, _ value: Double?) {
        if let value { members.append((key, .number(value))) }
    }

    public mutating func set(_ key: String, _ value: Int?) {
        if let value { members.append((key, .number(Double(value)))) }
    }

    public mutating func set(_ key: String, _ value: Bool?) {
        if let value { members.append((key, .bool(value))) }
    }

    /// A time as milliseconds since the epoch.
    public mutating func set(_ key: String, _ value: Timestamp?) {
        if let value { members.append((key, .number(Double(value.milliseconds)))) }
    }

    public mutating func set(_ key: String, _ value: JSONValue?) {
        if let value { members.append((key, value)) }
    }

    public var value: JSONValue { .object(JSONObject(members)) }
}

/// Reads a snapshot object back for ``StatefulTransform/restore(device:from:)``: a member of
/// the wrong kind throws (the device then starts afresh, logged), a missing one is nil.
public struct SnapshotReader {
    private let object: JSONObject

    public init(_ snapshot: JSONValue) throws(StateSnapshotError) {
        guard case .object(let o) = snapshot else { throw StateSnapshotError("expected an object, got \(snapshot.kindName)") }
        object = o
    }

    public func double(_ key: String) throws(StateSnapshotError) -> Double? {
        guard let v = object[key], v != .null else { return nil }
        guard case .number(let n) = v, n.isFinite else { throw StateSnapshotError("\(key): expected a number, got \(v.kindName)") }
        return n
    }

    public func int(_ key: String) throws(StateSnapshotError) -> Int? {
        guard let n = try double(key) else { return nil }
        guard n == n.rounded(), abs(n) < 9e15 else { throw StateSnapshotError("\(key): expected a whole number, got \(n)") }
        return Int(n)
    }

    public func bool(_ key: String) throws(StateSnapshotError) -> Bool? {
        guard let v = object[key], v != .null else { return nil }
        guard case .bool(let b) = v else { throw StateSnapshotError("\(key): expected a boolean, got \(v.kindName)") }
        return b
    }

    public func time(_ key: String) throws(StateSnapshotError) -> Timestamp? {
        try int(key).map { Timestamp(milliseconds: Int64($0)) }
    }

    /// A nested object's members.
    public func members(_ key: String) throws(StateSnapshotError) -> JSONObject? {
        guard let v = object[key], v != .null else { return nil }
        guard case .object(let o) = v else { throw StateSnapshotError("\(key): expected an object, got \(v.kindName)") }
        return o
    }
}
