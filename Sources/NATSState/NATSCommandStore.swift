import Dispatch
import GatewayCore
import Locking
import NATSClient

/// The commands of a fleet's gateways in a NATS JetStream Key-Value bucket (`settings.state.nats`
/// with `commands_bucket`): a command submitted to any gateway reaches the device through
/// whichever gateway holds its connection, exactly once, and its status is read from every one.
///
/// Keys: `cmd.<id>` (the command's JSON, as the API shows it), `dev.<device>` (who holds the
/// device: `{"source", "gateway", "since"}`, written when its connection moves to another
/// gateway). Every change of a command is a compare-and-swap on its revision, checked against the
/// status the writer read. Only the gateway holding the newest connection to a device sends it
/// commands (a connection that lingers on another gateway after the device moved sends nothing);
/// when two send in the moment before they learn who holds it, one wins the swap, and the holder
/// sends again what the other sent on its older connection. Other gateways' writes arrive on a
/// core subscription to the bucket's subjects (`$KV.<bucket>.>`), read on a thread of the
/// store's, so the holder sends a command submitted elsewhere within milliseconds.
public final class NATSCommandStore: CommandStore, @unchecked Sendable {
    // Unchecked Sendable: every stored property is a constant, thread-safe or locked.
    public let location: String
    public var isShared: Bool { true }
    private let connection: NATSConnection
    private let bucket: NATSKeyValueBucket
    private let subscription: NATSSubscription
    private let timeout: Duration
    private let closed = Locked(false)
    private let observers = Locked<[@Sendable (CommandStoreChange) -> Void]>([])
    private let watcher = DispatchQueue(label: "locgate-commands-nats")
    private let done = DispatchSemaphore(value: 0)

    /// Binds (or creates) the bucket on `connection`'s cluster and starts watching it.
    public init(configuration: NATSStateConfiguration, context: StateStoreContext) throws {
        var options = configuration.connection
        options.name = "locgate commands"
        let logger = context.logger
        let connection = try NATSConnection.connectNow(options, jetStream: NATSJetStreamSettings(apiTimeout: min(configuration.timeout, .seconds(3)))) { event in
            if case .disconnected = event { logger.warning("command store: disconnected from NATS; reconnecting") }
        }
        guard connection.waitUntilConnectedNow(timeout: configuration.timeout) else {
            throw CommandError.unavailable("no server of \(options.servers.joined(separator: ", ")) answered within \(DurationText.format(configuration.timeout))")
        }
        let replicas = configuration.replicas ?? max(1, min(3, Set(connection.knownServers).count))
        let wanted = NATSKeyValueConfig(bucket: configuration.commandsBucket, replicas: replicas, ttl: .zero)
        let deadline = ContinuousClock.now + configuration.timeout
        var bound: (bucket: NATSKeyValueBucket, created: Bool)?
        while bound == nil {
            do { bound = try connection.keyValueNow(wanted) } catch {
                if ContinuousClock.now >= deadline { throw error }
                // A cluster that has just started may not have placed the stream yet.
                _ = DispatchSemaphore(value: 0).wait(timeout: .now() + 0.2)
            }
        }
        guard let bound else { throw CommandError.unavailable("bucket \(configuration.commandsBucket) could not be bound") }
        if bound.created { logger.info("created key-value bucket \(configuration.commandsBucket) (\(replicas) replica(s)) for commands") }
        self.connection = connection
        bucket = bound.bucket
        timeout = configuration.timeout
        location = "nats bucket \(configuration.commandsBucket)"
        subscription = try connection.subscribe(subject: "$KV.\(configuration.commandsBucket).>", pendingLimit: 65_536)
        watcher.async { [self] in watch() }
    }

    deinit { close() }

    public func close() {
        guard closed.withLock({ c -> Bool in defer { c = true }; return !c }) else { return }
        done.wait()
        connection.closeNow()
    }

    // MARK: - Watching

    private func watch() {
        defer { done.signal() }
        while !closed.withLock({ $0 }) {
            guard let messages = try? subscription.nextNow(max: 256, timeout: .seconds(1)) else { continue }
            for m in messages {
                // A delete marker has no body. Own writes come back too: the board knows them.
                guard !m.payload.isEmpty, let change = Self.change(key: m.subject.dropFirst("$KV.\(bucket.name).".count), m.payload) else { continue }
                for observer in observers.withLock({ $0 }) { observer(change) }
            }
        }
    }

    public func observe(_ changed: @escaping @Sendable (CommandStoreChange) -> Void) {
        observers.withLock { $0.append(changed) }
    }

    /// A key's value as a change: a command, or a device's holder; nil for what is neither.
    static func change(key: Substring, _ value: [UInt8]) -> CommandStoreChange? {
        if key.hasPrefix("cmd.") {
            return (try? JSONValue.parse(value)).flatMap(DeviceCommand.init(json:)).map { .command($0) }
        }
        guard key.hasPrefix("dev."), let device = StateKeys.unescape(key.dropFirst(4)), let holder = holder(value) else { return nil }
        return .holder(device: device, holder)
    }

    /// A `dev.` value: `{"source", "gateway", "since"}`; nil for one that names no gateway (the
    /// source alone, as ``saveDevice(_:source:)`` writes it).
    static func holder(_ value: [UInt8]) -> CommandHolder? {
        guard let v = try? JSONValue.parse(value), let source = v["source"]?.stringValue, let gateway = v["gateway"]?.stringValue,
              let since = v["since"]?.numberValue else { return nil }
        return CommandHolder(source: source, gateway: gateway, since: Timestamp(milliseconds: Int64(since)))
    }

    /// A `dev.` value's source: the JSON's, or the whole text (as written before holders).
    static func source(_ value: [UInt8]) -> String {
        if let v = try? JSONValue.parse(value), let source = v["source"]?.stringValue { return source }
        return String(decoding: value, as: UTF8.self)
    }

    // MARK: - Commands

    static func key(_ id: String) -> String { "cmd." + StateKeys.escape(id) }
    static func deviceKey(_ device: String) -> String { "dev." + StateKeys.escape(device) }

    public func load() throws -> [DeviceCommand] {
        try bucket.entries(matching: "cmd.>", timeout: timeout).compactMap { e in
            guard !e.deleted, let value = try? JSONValue.parse(e.value) else { return nil }
            return DeviceCommand(json: value)
        }
    }

    public func fetch(_ id: String) throws -> DeviceCommand? {
        try stored(Self.key(id))?.command
    }

    /// The stream leader's entry under `key` and the command it holds; nil when there is none.
    private func stored(_ key: String) throws -> (entry: NATSKeyValueEntry, command: DeviceCommand)? {
        guard let e = try bucket.latest(key), !e.deleted,
              let command = (try? JSONValue.parse(e.value)).flatMap(DeviceCommand.init(json:)) else { return nil }
        return (e, command)
    }

    public func save(_ command: DeviceCommand, expecting: CommandStatus?) throws {
        let key = Self.key(command.id)
        let value = Array(command.json.jsonText.utf8)
        let outcome: NATSKeyValueWrite
        if let expecting {
            // The leader's value: a replica that is behind could let two gateways claim one send.
            guard let (current, stored) = try storedVersion(of: command, key: key) else {
                throw CommandError.conflict("command \(command.id) is gone")
            }
            guard stored.status == expecting else {
                throw CommandError.conflict("command \(command.id) is \(stored.status.rawValue), not \(expecting.rawValue): another gateway moved it")
            }
            outcome = try bucket.update(key, value: value, last: current.revision)
        } else {
            outcome = try bucket.create(key, value: value)
        }
        if case .conflict(let text) = outcome {
            throw CommandError.conflict("command \(command.id) was written by another gateway meanwhile (\(text))")
        }
    }

    /// The stream leader's entry for `command` and the version it holds; nil when there is none.
    ///
    /// Another gateway's write reaches this one's watch on the core subscription, which does not
    /// wait for the stream: the leader may not have stored it yet when this gateway acts on it.
    /// A version missing or older than the one `command` was moved from is therefore read again
    /// for a moment (eight more reads, 5 ms to 640 ms apart, about 1.3 s in all) before it counts
    /// as gone or moved. Without this a command submitted elsewhere and seen here first was taken
    /// for gone and never sent (FleetCommandTests, seen under load).
    private func storedVersion(of command: DeviceCommand, key: String) throws -> (entry: NATSKeyValueEntry, command: DeviceCommand)? {
        var found = try stored(key)
        var pause = 5
        while pause <= 640, (found?.command.history.count ?? 0) < command.history.count - 1 {
            // A bounded pause on the caller's thread (the board's queue): rare, and the answer is
            // needed before the command may go.
            _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(pause))
            pause *= 2
            found = try stored(key)
        }
        return found
    }

    public func loadDevices() throws -> [String: String] {
        var out: [String: String] = [:]
        for e in try bucket.entries(matching: "dev.>", timeout: timeout) where !e.deleted {
            guard let device = StateKeys.unescape(e.key.dropFirst(4)[...]) else { continue }
            out[device] = Self.source(e.value)
        }
        return out
    }

    public func loadHolders() throws -> [String: CommandHolder] {
        var out: [String: CommandHolder] = [:]
        for e in try bucket.entries(matching: "dev.>", timeout: timeout) where !e.deleted {
            guard let device = StateKeys.unescape(e.key.dropFirst(4)[...]), let holder = Self.holder(e.value) else { continue }
            out[device] = holder
        }
        return out
    }

    public func saveDevice(_ device: String, source: String) throws {
        try write(device, JSONValue.object(JSONObject([("source", .string(source))]))) { _ in true }
    }

    /// Written unless the store names a newer holder: every gateway ends with the newest one.
    public func announce(_ device: String, holder: CommandHolder) throws {
        let value = JSONValue.object(JSONObject([("source", .string(holder.source)), ("gateway", .string(holder.gateway)),
                                                 ("since", .number(Double(holder.since.milliseconds)))]))
        try write(device, value) { current in Self.holder(current).map { !$0.isNewer(than: holder) } ?? true }
    }

    /// Writes a `dev.` key when `replaces` says so of what it holds, by compare-and-swap (another
    /// gateway's write in between is read again).
    private func write(_ device: String, _ value: JSONValue, replaces: ([UInt8]) -> Bool) throws {
        let key = Self.deviceKey(device)
        let bytes = Array(value.jsonText.utf8)
        for _ in 0..<5 {
            let outcome: NATSKeyValueWrite
            if let current = try bucket.latest(key), !current.deleted {
                if current.value == bytes || !replaces(current.value) { return }
                outcome = try bucket.update(key, value: bytes, last: current.revision)
            } else {
                outcome = try bucket.create(key, value: bytes)
            }
            if case .written = outcome { return }
        }
        throw CommandError.unavailable("dev.\(device) kept changing under five writes")
    }

    public func purge(before: Timestamp) throws {
        for command in try load() where command.status.isFinal && (command.history.last?.time ?? command.created) < before {
            try bucket.delete(Self.key(command.id))
        }
    }
}
