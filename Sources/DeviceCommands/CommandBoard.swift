import Dispatch
import GatewayCore

/// A gateway's commands to devices (``CommandCenter``): taken from the operator API and the
/// `commands` sink, kept in a ``CommandStore``, and sent to each device on the connection its
/// listening source holds, one at a time, as the rules of ``DeviceCommand`` say.
///
///     submit ──▶ store (queued) ──▶ device connected? ──▶ store (sent) ──▶ link.send ──▶ device
///                                      │ no: waits for connected(_:)            │
///     answered(id) ◀── the source matched the device's answer ◀─────────────────┘
///         └──▶ store (done / failed / delivered) ──▶ the device's next command
///
/// Every status change is also an event in the pipeline (a position with a `command` event, sent
/// through the device's source, which counts it as `commands.<status>`).
///
/// Everything runs on one serial queue of its own: the store's writes (an fsync each: commands
/// are few) never run on a source's I/O thread, and the order of changes is the order of calls.
public final class CommandBoard: CommandCenter, @unchecked Sendable {
    // Unchecked Sendable: every stored property below `queue` is used on `queue` only.

    /// Defaults for requests that say nothing.
    public struct Settings: Sendable, Hashable {
        public var ttl: Duration
        public var attempts: Int
        /// Final commands are kept this long for their status to be read.
        public var retain: Duration

        public init(ttl: Duration = .seconds(86_400), attempts: Int = 3, retain: Duration = .seconds(7 * 86_400)) {
            self.ttl = ttl
            self.attempts = attempts
            self.retain = retain
        }
    }

    private struct Route {
        var types: Set<CommandType>
        var emit: @Sendable (Position) -> Void
    }

    /// The link of a connected device, and the command in flight on it.
    private struct Connection {
        var link: any CommandLink
        var source: String
        var inFlight: String?
    }

    public let settings: Settings
    private let store: any CommandStore
    private let clock: any GatewayClock
    private let logger: Logger
    private let queue = DispatchQueue(label: "locgate-commands")
    private var commands: [String: DeviceCommand] = [:]
    /// Each device's commands in the order they were submitted.
    private var byDevice: [String: [String]] = [:]
    private var routes: [String: Route] = [:]
    /// Where each device is known: a source's `devices`, or where it last connected.
    private var deviceSources: [String: String] = [:]
    private var connections: [String: Connection] = [:]
    private var timer: (any DispatchSourceTimer)?
    private var sequence: UInt64 = 0

    /// Loads what `store` keeps and starts checking expiries every second.
    public init(store: any CommandStore, settings: Settings = Settings(), clock: any GatewayClock, logger: Logger) throws {
        self.store = store
        self.settings = settings
        self.clock = clock
        self.logger = logger
        try store.purge(before: Timestamp(milliseconds: clock.now().milliseconds - settings.retain.milliseconds))
        for command in try store.load().sorted(by: { $0.created < $1.created }) {
            commands[command.id] = command
            byDevice[command.device, default: []].append(command.id)
        }
        deviceSources = try store.loadDevices()
        let pending = commands.values.filter { !$0.status.isFinal }.count
        logger.info("commands: \(pending) pending, \(commands.count - pending) ended, in \(store.location)")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler { [weak self] in self?.expire() }
        timer.resume()
        self.timer = timer
        // A fleet's store: what the other gateways submit and change comes here too.
        store.observe { [weak self] command in self?.changed(command) }
    }

    /// Stops the expiry checks and closes the store.
    public func close() {
        queue.sync {
            timer?.cancel()
            timer = nil
            store.close()
        }
    }

    // MARK: - Sources

    public func register(source: String, types: Set<CommandType>, emit: @escaping @Sendable (Position) -> Void) {
        queue.sync { routes[source] = Route(types: types, emit: emit) }
    }

    public func knows(devices: [String], source: String) {
        queue.sync {
            for d in devices where deviceSources[d] == nil { deviceSources[d] = source }
        }
    }

    public func connected(_ device: String, source: String, link: any CommandLink) {
        queue.async { [self] in
            // The same link again (an HTTP client's next request) keeps what is in flight on it;
            // a new one (a new connection) starts afresh: what was in flight goes again.
            if connections[device]?.link !== link { connections[device] = Connection(link: link, source: source) }
            if deviceSources[device] != source {
                deviceSources[device] = source
                do { try store.saveDevice(device, source: source) } catch {
                    logger.warning("commands: cannot remember device \(device): \(error)")
                }
            }
            pump(device)
        }
    }

    public func disconnected(_ device: String, link: any CommandLink) {
        queue.async { [self] in
            guard let c = connections[device], c.link === link else { return }
            connections[device] = nil
        }
    }

    public func answered(_ id: String, outcome: CommandOutcome) {
        queue.async { [self] in
            guard var command = commands[id], command.status == .sent || command.status == .delivered else { return }
            switch outcome {
            case .delivered: command.move(to: .delivered, at: clock.now())
            case .done(let text): command.move(to: .done, at: clock.now(), result: text)
            case .failed(let text): command.move(to: .failed, at: clock.now(), result: text)
            }
            guard record(command) else { return }
            if command.status.isFinal || command.status == .delivered, connections[command.device]?.inFlight == id {
                connections[command.device]?.inFlight = nil
            }
            pump(command.device)
        }
    }

    // MARK: - API

    public func submit(_ request: CommandRequest) throws(CommandError) -> DeviceCommand {
        let result: Result<DeviceCommand, CommandError> = queue.sync {
            if deviceSources[request.device] == nil, store.isShared, let shared = try? store.loadDevices() {
                // Another gateway of the fleet may hold it.
                deviceSources.merge(shared) { own, _ in own }
            }
            guard let source = deviceSources[request.device] else { return .failure(.unknownDevice(request.device)) }
            if let route = routes[source] {
                guard route.types.contains(request.type) else {
                    return .failure(.unsupported(request.type, source: source, supported: route.types))
                }
            } else if !store.isShared {
                return .failure(.unknownDevice(request.device))
            }
            let problems = CommandRequest.check(request.type, request.parameters)
            guard problems.isEmpty else { return .failure(.invalid(problems)) }
            let id = request.id ?? newID()
            guard commands[id] == nil else { return .failure(.conflict("a command with id \"\(id)\" exists")) }
            let now = clock.now()
            let ttl = request.ttl ?? settings.ttl
            let command = DeviceCommand(id: id, device: request.device, type: request.type, parameters: request.parameters,
                                        created: now, expires: Timestamp(milliseconds: now.milliseconds + ttl.milliseconds),
                                        attempts: request.attempts ?? settings.attempts, submittedBy: request.submittedBy, source: source)
            do { try store.save(command, expecting: nil) } catch {
                return .failure(.unavailable("cannot store the command: \(error)"))
            }
            commands[id] = command
            byDevice[command.device, default: []].append(id)
            logger.info("command \(id) (\(command.type.rawValue)) for \(command.device) submitted by \(command.submittedBy)")
            announce(command)
            let device = command.device
            queue.async { [self] in pump(device) }
            return .success(command)
        }
        return try result.get()
    }

    public func cancel(_ id: String, by: String) throws(CommandError) -> DeviceCommand {
        let result: Result<DeviceCommand, CommandError> = queue.sync {
            guard var command = commands[id] else { return .failure(.notFound(id)) }
            guard command.status == .queued || command.status == .sent else {
                return .failure(.conflict("command \(id) is \(command.status.rawValue): only a command not yet delivered can be cancelled"))
            }
            command.move(to: .cancelled, at: clock.now())
            guard record(command) else { return .failure(.unavailable("cannot store the cancellation")) }
            logger.info("command \(id) (\(command.type.rawValue)) for \(command.device) cancelled by \(by)")
            let device = command.device
            if connections[device]?.inFlight == id { connections[device]?.inFlight = nil }
            queue.async { [self] in pump(device) }
            return .success(command)
        }
        return try result.get()
    }

    public func command(_ id: String) -> DeviceCommand? {
        queue.sync {
            // In a fleet's store another gateway may have moved it: read it there.
            if store.isShared, let fresh = try? store.fetch(id) { commands[id] = fresh }
            return commands[id]
        }
    }

    /// A command another gateway stored: taken in, and sent when its device is connected here.
    private func changed(_ command: DeviceCommand) {
        queue.async { [self] in
            let known = commands[command.id]
            guard known != command else { return }
            commands[command.id] = command
            if known == nil { byDevice[command.device, default: []].append(command.id) }
            if connections[command.device]?.inFlight == command.id, command.status != .sent {
                connections[command.device]?.inFlight = nil
            }
            pump(command.device)
        }
    }

    public func commands(device: String) -> [DeviceCommand] {
        queue.sync { (byDevice[device] ?? []).reversed().compactMap { commands[$0] } }
    }

    public func shadow(device: String) -> [CommandType: String] {
        queue.sync {
            var out: [CommandType: String] = [:]
            for id in byDevice[device] ?? [] {
                guard let c = commands[id], c.status == .done || c.status == .delivered else { continue }
                if c.type == .setInterval, let s = CommandRequest.intervalSeconds(c.parameters) { out[.setInterval] = String(s) }
            }
            return out
        }
    }

    /// Commands not yet ended for `device` (waiting to be sent, or sent and not answered).
    public func pending(device: String) -> [DeviceCommand] {
        queue.sync { (byDevice[device] ?? []).compactMap { commands[$0] }.filter { !$0.status.isFinal && $0.status != .delivered } }
    }

    // MARK: - Sending (on the queue)

    /// Sends the device's next command when it is connected and nothing is in flight.
    private func pump(_ device: String) {
        guard var connection = connections[device], connection.inFlight == nil else { return }
        let now = clock.now()
        for id in byDevice[device] ?? [] {
            guard var command = commands[id], command.status == .queued || command.status == .sent else { continue }
            if now >= command.expires {
                command.move(to: .expired, at: now)
                _ = record(command)
                continue
            }
            if command.sends >= command.attempts {
                command.move(to: .failed, at: now, result: "no answer after \(command.sends) send(s)")
                _ = record(command)
                continue
            }
            command.sends += 1
            command.move(to: .sent, at: now)
            // Durable before the bytes go: a crash after this sends it again, never loses it.
            guard record(command) else { return }
            connection.inFlight = id
            connections[device] = connection
            connection.link.send(command)
            return
        }
    }

    /// Marks the commands past their expiry (the board does it every second; tests call it).
    public func sweep() {
        queue.sync { expire() }
    }

    /// Commands past their expiry that have not been sent, or were sent and not answered.
    private func expire() {
        let now = clock.now()
        for (id, var command) in commands where (command.status == .queued || command.status == .sent) && now >= command.expires {
            command.move(to: .expired, at: now)
            _ = record(command)
            if connections[command.device]?.inFlight == id {
                connections[command.device]?.inFlight = nil
                pump(command.device)
            }
        }
    }

    /// Stores a changed command (it must have been in its previous status) and announces it;
    /// false when the store refused.
    @discardableResult
    private func record(_ command: DeviceCommand) -> Bool {
        let previous = commands[command.id]?.status
        do {
            try store.save(command, expecting: previous)
        } catch let error as CommandError where error.httpStatus == 409 {
            // Another gateway moved it first (a fleet's store): take what it stored, do nothing.
            logger.debug("commands: \(error)")
            if let fresh = try? store.fetch(command.id) { commands[command.id] = fresh }
            return false
        } catch {
            logger.error("commands: cannot store command \(command.id) as \(command.status.rawValue): \(error)")
            return false
        }
        commands[command.id] = command
        announce(command)
        return true
    }

    /// The status change as an event through the device's source (which counts it).
    private func announce(_ command: DeviceCommand) {
        guard let route = routes[command.source] else { return }
        var attributes = ["command_id": command.id, "command_type": command.type.rawValue]
        if let result = command.result { attributes["command_result"] = result }
        let event = Position(time: clock.now(), source: command.source, device: command.device,
                             id: "\(command.id)-\(command.status.rawValue)-\(command.history.count)", attributes: attributes,
                             event: PositionEvent(kind: .command, status: command.status.rawValue))
        route.emit(event)
    }

    private func newID() -> String {
        sequence += 1
        var generator = SystemRandomNumberGenerator()
        let random = String(generator.next() & 0xFFFF_FFFF, radix: 16)
        return "c\(clock.now().milliseconds)-\(random)-\(sequence)"
    }
}
