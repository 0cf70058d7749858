import Dispatch
import GatewayCore
import Locking
import NATSClient

/// The commands of a fleet's gateways in a NATS JetStream Key-Value bucket (`settings.state.nats`
/// with `commands_bucket`): a command submitted to any gateway reaches the device through
/// whichever gateway holds its connection, exactly once, and its status is read from every one.
///
/// Keys: `cmd.<id>` (the command's JSON, as the API shows it), `dev.<device>` (the source that
/// knows the device). Every change of a command is a compare-and-swap on its revision, checked
/// against the status the writer read: two gateways that both hold the device (it moved and the
/// old connection is not gone yet) both try to mark it sent, and one of them wins; the other
/// reads what won and sends nothing. Other gateways' writes arrive on a core subscription to the
/// bucket's subjects (`$KV.<bucket>.cmd.>`), read on a thread of the store's, so a gateway that
/// holds the device sends a command submitted elsewhere within milliseconds.
public final class NATSCommandStore: CommandStore, @unchecked Sendable {
    // Unchecked Sendable: `subscription` and `watching` are set in init and read by the watcher.
    public let location: String
    public var isShared: Bool { true }
    private let connection: NATSConnection
    private let bucket: NATSKeyValueBucket
    private let subscription: NATSSubscription
    private let timeout: Duration
    private let closed = Locked(false)
    private let observers = Locked<[@Sendable (DeviceCommand) -> Void]>([])
    /// The JSON this store wrote last per key: its own writes come back on the subscription too.
    private let written = Locked<[String: [UInt8]]>([:])
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
        subscription = try connection.subscribe(subject: "$KV.\(configuration.commandsBucket).cmd.>", pendingLimit: 65_536)
        watcher.async { [self] in watch() }
    }

    deinit { close() }

    public func close() {
        guard closed.withLock({ c -> Bool in defer { c = true }; return !c }) else { return }
        done.wait()
    }

    // MARK: - Watching

    private func watch() {
        defer { done.signal() }
        while !closed.withLock({ $0 }) {
            guard let messages = try? subscription.nextNow(max: 256, timeout: .seconds(1)) else { continue }
            for m in messages {
                let key = String(m.subject.dropFirst("$KV.\(bucket.name).".count))
                // A delete marker has no body; an own write comes back as it was written.
                guard !m.payload.isEmpty, written.withLock({ $0[key] }) != m.payload,
                      let value = try? JSONValue.parse(m.payload), let command = DeviceCommand(json: value) else { continue }
                for observer in observers.withLock({ $0 }) { observer(command) }
            }
        }
    }

    public func observe(_ changed: @escaping @Sendable (DeviceCommand) -> Void) {
        observers.withLock { $0.append(changed) }
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
        guard let e = try bucket.latest(Self.key(id)), !e.deleted, let value = try? JSONValue.parse(e.value) else { return nil }
        return DeviceCommand(json: value)
    }

    public func save(_ command: DeviceCommand, expecting: CommandStatus?) throws {
        let key = Self.key(command.id)
        let value = Array(command.json.jsonText.utf8)
        let outcome: NATSKeyValueWrite
        if let expecting {
            // The leader's value: a replica that is behind could let two gateways claim one send.
            guard let current = try bucket.latest(key), !current.deleted,
                  let stored = (try? JSONValue.parse(current.value)).flatMap(DeviceCommand.init(json:)) else {
                throw CommandError.conflict("command \(command.id) is gone")
            }
            guard stored.status == expecting else {
                throw CommandError.conflict("command \(command.id) is \(stored.status.rawValue), not \(expecting.rawValue): another gateway moved it")
            }
            written.withLock { $0[key] = value }
            outcome = try bucket.update(key, value: value, last: current.revision)
        } else {
            written.withLock { $0[key] = value }
            outcome = try bucket.create(key, value: value)
        }
        if case .conflict(let text) = outcome {
            throw CommandError.conflict("command \(command.id) was written by another gateway meanwhile (\(text))")
        }
    }

    public func loadDevices() throws -> [String: String] {
        var out: [String: String] = [:]
        for e in try bucket.entries(matching: "dev.>", timeout: timeout) where !e.deleted {
            guard let device = StateKeys.unescape(e.key.dropFirst(4)[...]) else { continue }
            out[device] = String(decoding: e.value, as: UTF8.self)
        }
        return out
    }

    public func saveDevice(_ device: String, source: String) throws {
        let key = Self.deviceKey(device)
        let value = Array(source.utf8)
        if let current = try bucket.get(key), !current.deleted {
            if current.value == value { return }
            _ = try bucket.update(key, value: value, last: current.revision)
        } else {
            _ = try bucket.create(key, value: value)
        }
    }

    public func purge(before: Timestamp) throws {
        for command in try load() where command.status.isFinal && (command.history.last?.time ?? command.created) < before {
            try bucket.delete(Self.key(command.id))
        }
    }
}
