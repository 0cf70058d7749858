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
        /// How long the device has to answer before its next command goes (the unanswered one
        /// stays `sent`, and goes again on its next connection).
        public var answerTimeout: Duration

        public init(ttl: Duration = .seconds(86_400), attempts: Int = 3, retain: Duration = .seconds(7 * 86_400),
                    answerTimeout: Duration = .seconds(60)) {
            self.ttl = ttl
            self.attempts = attempts
            self.retain = retain
            self.answerTimeout = answerTimeout
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
        /// `<gateway>/<n>`: what a command sent on it records (``DeviceCommand/sentOn``).
        var token: String
        var since: Timestamp
        var inFlight: String?
        var inFlightSince = Timestamp(milliseconds: 0)
    }

    public let settings: Settings
    /// This board's name in a fleet's store (who holds a device, on which connection a command went).
    public let gateway: String
    private let store: any CommandStore
    private let clock: any GatewayClock
    private let logger: Logger
    private let queue = DispatchQueue(label: "locgate-commands")
    /// Announcements of holders to a fleet's store: off `queue`, which they need not hold up.
    private let announcements = DispatchQueue(label: "locgate-commands-holders")
    private var commands: [String: DeviceCommand] = [:]
    /// Each device's commands in the order they were submitted.
    private var byDevice: [String: [String]] = [:]
    private var routes: [String: Route] = [:]
    /// Where each device is known: a source's `devices`, or where it last connected.
    private var deviceSources: [String: String] = [:]
    /// A fleet's store: the newest holder of each device's connection that any gateway announced.
    private var holders: [String: CommandHolder] = [:]
    private var connections: [String: Connection] = [:]
    private var timer: (any DispatchSourceTimer)?
    private var sequence: UInt64 = 0
    private var epoch: UInt64 = 0
    private var lastPurge: Timestamp

    /// Loads what `store` keeps and starts checking expiries every second. `gateway` names this
    /// board in a fleet's store (by default a random name, new at each start).
    public init(store: any CommandStore, settings: Settings = Settings(), gateway: String? = nil, clock: any GatewayClock, logger: Logger) throws {
        self.store = store
        self.settings = settings
        self.clock = clock
        self.logger = logger
        var generator = SystemRandomNumberGenerator()
        self.gateway = gateway ?? "gw-" + String(generator.next() & 0xFFFF_FFFF_FFFF, radix: 16)
        lastPurge = clock.now()
        try store.purge(before: Timestamp(milliseconds: clock.now().milliseconds - settings.retain.milliseconds))
        for command in try store.load().sorted(by: { $0.created < $1.created }) {
            commands[command.id] = command
            byDevice[command.device, default: []].append(command.id)
        }
        deviceSources = try store.loadDevices()
        holders = try store.loadHolders()
        for (device, holder) in holders { deviceSources[device] = holder.source }
        let pending = commands.values.filter { !$0.status.isFinal }.count
        logger.info("commands: \(pending) pending, \(commands.count - pending) ended, in \(store.location)")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler { [weak self] in self?.expire() }
        timer.resume()
        self.timer = timer
        // A fleet's store: what the other gateways submit, change and hold comes here too.
        store.observe { [weak self] change in
            guard let self else { return }
            queue.async { self.take(change) }
        }
    }

    /// Stops the expiry checks and closes the store.
    public func close() {
        announcements.sync {}
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
            // a new one (a new connection) starts afresh: what was sent and not answered goes again.
            if connections[device]?.link !== link {
                epoch += 1
                connections[device] = Connection(link: link, source: source, token: "\(gateway)/\(epoch)", since: clock.now())
                if store.isShared { hold(device, source: source) }
            }
            if !store.isShared, deviceSources[device] != source {
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
            guard var command = commands[id] else { return }
            if connections[command.device]?.inFlight == id { connections[command.device]?.inFlight = nil }
            defer { pump(command.device) }
            switch command.status {
            case .sent: break
            case .cancelled, .expired:
                // It reached the device before it was cancelled or expired, and the device says
                // what it did: that is its status now.
                guard command.history.contains(where: { $0.status == .sent }) else { return }
                logger.info("command \(id) (\(command.type.rawValue)) for \(command.device) was answered after it \(command.status == .cancelled ? "was cancelled" : "expired")")
            default: return
            }
            switch outcome {
            case .delivered: command.move(to: .delivered, at: clock.now())
            case .done(let text): command.move(to: .done, at: clock.now(), result: text)
            case .failed(let text): command.move(to: .failed, at: clock.now(), result: text)
            }
            record(command)
        }
    }

    // MARK: - API

    public func submit(_ request: CommandRequest) throws(CommandError) -> DeviceCommand {
        let result: Result<DeviceCommand, CommandError> = queue.sync {
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
            do { try store.save(command, expecting: nil) } catch let error as CommandError {
                return .failure(error)
            } catch {
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
            guard record(command) else {
                let now = commands[id]?.status.rawValue ?? "gone"
                return .failure(.conflict("command \(id) changed meanwhile (it is \(now)): cancel it again if it still may be"))
            }
            logger.info("command \(id) (\(command.type.rawValue)) for \(command.device) cancelled by \(by)")
            withdraw(command)
            let device = command.device
            queue.async { [self] in pump(device) }
            return .success(command)
        }
        return try result.get()
    }

    public func command(_ id: String) -> DeviceCommand? {
        queue.sync {
            // In a fleet's store another gateway may have moved it: read it there, and take it as
            // if it had come on the subscription.
            if store.isShared, let fresh = try? store.fetch(id) { take(.command(fresh)) }
            return commands[id]
        }
    }

    public func isKnown(device: String) -> Bool {
        queue.sync { deviceSources[device] != nil || byDevice[device] != nil }
    }

    /// What another gateway stored (or this one, coming back): a newer version of a command is
    /// taken in and acted on; an older one or the same is ignored.
    private func take(_ change: CommandStoreChange) {
        switch change {
        case .holder(let device, let holder):
            deviceSources[device] = holder.source
            if let known = holders[device], !holder.isNewer(than: known) { return }
            holders[device] = holder
            pump(device)
        case .command(let command):
            let known = commands[command.id]
            // The history grows with every change: a shorter or equal one is not news.
            if let known, command.history.count <= known.history.count { return }
            commands[command.id] = command
            if known == nil { byDevice[command.device, default: []].append(command.id) }
            if connections[command.device]?.inFlight == command.id, command.status != .sent {
                if command.status == .cancelled || command.status == .expired {
                    // Ended elsewhere while on its way here: its place is kept unless none of it went.
                    withdraw(command)
                } else {
                    connections[command.device]?.inFlight = nil
                }
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
        queue.sync { (byDevice[device] ?? []).compactMap { commands[$0] }.filter { !$0.status.isFinal } }
    }

    // MARK: - Sending (on the queue)

    /// A fleet: this gateway holds `device` from now on; the others learn it from the store.
    private func hold(_ device: String, source: String) {
        deviceSources[device] = source
        guard let c = connections[device] else { return }
        let holder = CommandHolder(source: source, gateway: gateway, since: c.since)
        let known = holders[device]
        holders[device] = holder
        // Its reconnections here change nothing for the others: written only when it moved here.
        guard known?.gateway != gateway || known?.source != source else { return }
        let (store, logger) = (store, logger)
        announcements.async {
            do { try store.announce(device, holder: holder) } catch {
                logger.warning("commands: cannot announce that this gateway holds \(device): \(error)")
            }
        }
    }

    /// Whether this gateway's connection to `device` is the newest one a gateway announced: an
    /// older one (the device moved and the old connection lingers) sends nothing.
    private func holds(_ device: String, _ c: Connection) -> Bool {
        guard store.isShared, let newest = holders[device], newest.gateway != gateway else { return true }
        return CommandHolder(source: c.source, gateway: gateway, since: c.since).isNewer(than: newest)
    }

    /// Sends the device's next command when it is connected here, nothing is in flight, and no
    /// newer connection to it is held elsewhere.
    private func pump(_ device: String) {
        guard var connection = connections[device], connection.inFlight == nil, holds(device, connection) else { return }
        let now = clock.now()
        for id in byDevice[device] ?? [] {
            guard var command = commands[id], command.status == .queued || command.status == .sent else { continue }
            // Sent on this connection and not answered in time: it goes again on the next one.
            if command.status == .sent, command.sentOn == connection.token { continue }
            if now >= command.expires {
                command.move(to: .expired, at: now)
                record(command)
                continue
            }
            if command.sends >= command.attempts {
                command.move(to: .failed, at: now, result: "no answer after \(command.sends) send(s)")
                record(command)
                continue
            }
            command.sends += 1
            command.sentOn = connection.token
            command.move(to: .sent, at: now)
            // Durable before the bytes go: a crash after this sends it again, never loses it.
            guard record(command) else {
                // Another gateway moved it meanwhile: look again at what it stored.
                if (commands[id]?.history.count ?? 0) >= command.history.count { queue.async { [self] in pump(device) } }
                return
            }
            connection.inFlight = id
            connection.inFlightSince = now
            connections[device] = connection
            connection.link.send(command)
            return
        }
    }

    /// Takes back a command that ended (cancelled, expired) from the link it went to, if none of
    /// it reached the device; then the device's next command may go. Otherwise it keeps its place
    /// until the device answers it or the answer timeout.
    private func withdraw(_ command: DeviceCommand) {
        guard let sentOn = command.sentOn, var c = connections[command.device], c.token == sentOn else { return }
        if c.link.withdraw(command.id), c.inFlight == command.id {
            c.inFlight = nil
            connections[command.device] = c
        }
    }

    /// Checks expiries and answer timeouts (the board does it every second; tests call it, and
    /// know when it returns that what the board was asked before is done).
    public func sweep() {
        announcements.sync {}
        queue.sync { expire() }
    }

    /// Frees the slot of commands not answered in time; expires commands past their time to live
    /// that wait to be sent, or were sent and are no longer in flight (or can be taken back);
    /// forgets ended commands past `retain` once an hour.
    private func expire() {
        let now = clock.now()
        var touched = Set<String>()
        for (device, var c) in connections {
            guard c.inFlight != nil, now.milliseconds - c.inFlightSince.milliseconds >= settings.answerTimeout.milliseconds else { continue }
            c.inFlight = nil
            connections[device] = c
            touched.insert(device)
        }
        for (id, var command) in commands where (command.status == .queued || command.status == .sent) && now >= command.expires {
            if command.status == .sent, var c = connections[command.device], c.token == command.sentOn {
                let taken = c.link.withdraw(id)
                if c.inFlight == id {
                    // Its bytes went: its answer or the answer timeout comes first.
                    guard taken else { continue }
                    c.inFlight = nil
                    connections[command.device] = c
                }
            }
            command.move(to: .expired, at: now)
            record(command)
            touched.insert(command.device)
        }
        for device in touched { pump(device) }
        if now.milliseconds - lastPurge.milliseconds >= 3_600_000 { purge(now) }
    }

    /// Forgets ended commands past `retain`, here and in the store.
    private func purge(_ now: Timestamp) {
        lastPurge = now
        let before = Timestamp(milliseconds: now.milliseconds - settings.retain.milliseconds)
        do { try store.purge(before: before) } catch {
            logger.warning("commands: cannot forget ended commands in \(store.location): \(error)")
            return
        }
        let gone = Set(commands.values.filter { $0.status.isFinal && ($0.history.last?.time ?? $0.created) < before }.map(\.id))
        guard !gone.isEmpty else { return }
        for id in gone { commands[id] = nil }
        for (device, ids) in byDevice {
            let kept = ids.filter { !gone.contains($0) }
            byDevice[device] = kept.isEmpty ? nil : kept
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
            // Another gateway moved it first (a fleet's store): take what it stored.
            logger.debug("commands: \(error)")
            if let fresh = try? store.fetch(command.id), let known = commands[command.id], fresh.history.count > known.history.count {
                commands[command.id] = fresh
            }
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
