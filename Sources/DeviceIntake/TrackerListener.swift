import GatewayCore
import Synchronization
import SystemIO
import TrackerProtocols

/// The connections of one listening TCP source, on the I/O loop's thread.
///
///     accept ─▶ limits ─▶ read ─▶ codec.decode ─▶ identification ─▶ directory ─▶ answer at once
///                 │                     │       ├▶ control ───────────────────────▶ answer at once
///                 └▶ close (counted)    │       └▶ records ─▶ inbox ─▶ pipeline ─▶ handled ─▶ answer
///                                       └▶ invalid (counted, skipped; never answered)
///
/// Rules:
/// - A device's answer for positions is written only when the runtime says every position of
///   its frame was handled end to end; answers of one connection go out in frame order.
/// - A connection with `max_unacked` positions waiting is not read, nor while the inbox is full
///   or while the peer does not take its answers (``TCPConnection/highWatermark``): TCP slows
///   the device down, nothing is dropped.
/// - Every limit closes the connection and counts why; nothing read from a connection that
///   closes before its answer is answered (the device resends it).
///
/// Everything here runs on the loop thread, except ``inboxDrained()``'s caller, which hops there.
public final class TrackerListener: @unchecked Sendable {
    // Unchecked Sendable: all state is used on the loop thread only (see EventLoop's rule).
    let loop: EventLoop
    let configuration: ListenerConfiguration
    let directory: DeviceDirectory
    let makeCodec: @Sendable (SocketAddress) -> any TrackerCodec
    let inbox: DeviceInbox
    let context: ComponentContext
    /// Identifies a connection when it is accepted (a `tcp` source naming devices by address);
    /// nil when the device identifies itself.
    let identifyAtAccept: (@Sendable (SocketAddress) -> String?)?
    /// Who may register and authenticate, for protocols whose devices do (JT/T 808); nil for none.
    let admissions: (any DeviceAdmissions)?
    /// Where commands to the devices come from; nil when the pipeline keeps none.
    var commands: (any CommandCenter)? { context.commands }
    /// The protocol's name, for logs and command failures.
    let protocolName: String
    private var listener: TCPListener?
    private var sweep: LoopTimer?
    private var connections: [ObjectIdentifier: DeviceConnection] = [:]
    private var perAddress: [String: Int] = [:]
    private var heldForInbox: [DeviceConnection] = []
    private var logLimit = LogRateLimit()
    var stamp: PositionStamp
    let openCount = Atomic<Int>(0)

    public init(loop: EventLoop, configuration: ListenerConfiguration, directory: DeviceDirectory, inbox: DeviceInbox,
                context: ComponentContext, identifyAtAccept: (@Sendable (SocketAddress) -> String?)? = nil,
                admissions: (any DeviceAdmissions)? = nil, protocolName: String = "tracker",
                makeCodec: @escaping @Sendable (SocketAddress) -> any TrackerCodec) {
        self.admissions = admissions
        self.protocolName = protocolName
        self.loop = loop
        self.configuration = configuration
        self.directory = directory
        self.inbox = inbox
        self.context = context
        self.identifyAtAccept = identifyAtAccept
        self.makeCodec = makeCodec
        stamp = PositionStamp(source: context.id)
        context.stats.gauge("connections.open") { [weak self] in self?.openCount.load(ordering: .relaxed) ?? 0 }
    }

    /// The address listened on (with the kernel's port when 0 was configured).
    public private(set) var address: SocketAddress = .unspecified

    /// Binds and starts accepting (loop thread).
    public func start() throws(SystemError) {
        loop.assertOnLoop()
        let listener = try loop.listenTCP(host: configuration.listen.host, port: configuration.listen.port) { [weak self] in
            guard let self else {
                $0.close()
                return
            }
            accepted($0)
        }
        self.listener = listener
        address = listener.address
        do {
            sweep = try loop.repeatingTimer(every: .seconds(1)) { [weak self] in self?.sweepConnections() }
        } catch {
            listener.close()
            throw error
        }
    }

    /// Stops accepting and closes every connection; answers still owed are never written
    /// (loop thread).
    public func stop() {
        loop.assertOnLoop()
        listener?.close()
        listener = nil
        sweep?.stop()
        sweep = nil
        for c in Array(connections.values) { c.close(reason: nil) }
    }

    /// Connections open (loop thread).
    public var openConnections: Int { connections.count }

    // MARK: - Accepting

    private func accepted(_ connection: TCPConnection) {
        let stats = context.stats
        let host = connection.peer.host
        // Counted before the close: the peer may see the close before this thread runs on.
        if connections.count >= configuration.maxConnections {
            stats.count("connections.refused.limit")
            connection.close()
            warn("limit", "refusing connections: \(connections.count) open (max_connections)")
            return
        }
        if configuration.maxConnectionsPerAddress > 0 && perAddress[host, default: 0] >= configuration.maxConnectionsPerAddress {
            stats.count("connections.refused.per_address")
            connection.close()
            warn("address \(host)", "refusing connections from \(host): \(configuration.maxConnectionsPerAddress) open (max_connections_per_address)")
            return
        }
        let device = DeviceConnection(connection: connection, listener: self, codec: makeCodec(connection.peer), now: loop.now)
        connections[ObjectIdentifier(device)] = device
        perAddress[host, default: 0] += 1
        openCount.store(connections.count, ordering: .relaxed)
        stats.count("connections.accepted")
        connection.delegate = device
        if let identifyAtAccept {
            guard let identifier = identifyAtAccept(connection.peer), device.identify(identifier) else {
                device.close(reason: nil)
                return
            }
        }
        connection.startReading()
    }

    func removed(_ device: DeviceConnection) {
        guard connections.removeValue(forKey: ObjectIdentifier(device)) != nil else { return }
        let host = device.connection.peer.host
        if let n = perAddress[host] { perAddress[host] = n > 1 ? n - 1 : nil }
        openCount.store(connections.count, ordering: .relaxed)
    }

    // MARK: - Deadlines

    private func sweepConnections() {
        let now = loop.now
        let handshake = UInt64(configuration.handshakeTimeout.milliseconds)
        let idle = UInt64(configuration.idleTimeout.milliseconds)
        // Once a second over every connection: the checks are read in place, and only the few
        // connections that are due are collected (closing them changes `connections`).
        var silent: [DeviceConnection] = [], quiet: [DeviceConnection] = [], held: [DeviceConnection] = []
        for device in connections.values {
            if !device.identified && now &- device.acceptedAt >= handshake {
                silent.append(device)
            } else if now &- device.lastInput >= idle {
                quiet.append(device)
            } else if (!device.flushed || device.wantsIdle) && now &- device.lastInput >= 1_000 {
                held.append(device)
            }
        }
        for device in silent {
            context.stats.count("connections.closed.handshake_timeout")
            device.close(reason: "no identification within \(DurationText.format(configuration.handshakeTimeout))")
        }
        for device in quiet {
            context.stats.count("connections.closed.idle")
            device.close(reason: "idle for \(DurationText.format(configuration.idleTimeout))")
        }
        for device in held { device.flushIdle() }
    }

    // MARK: - Inbox

    /// The source's task took what the inbox held: connections held back for it read again.
    public func inboxDrained() {
        loop.assertOnLoop()
        guard !heldForInbox.isEmpty, !inbox.isFull else { return }
        let held = heldForInbox
        heldForInbox.removeAll()
        for device in held { device.release(.inbox) }
    }

    func holdForInbox(_ device: DeviceConnection) {
        device.hold(.inbox)
        heldForInbox.append(device)
    }

    // MARK: - Identity

    /// The device for `identifier`, or nil (counted, logged sparingly) when it is refused.
    func resolve(_ identifier: String, peer: SocketAddress) -> DeviceEntry? {
        if let entry = directory.lookup(identifier, now: Int64(loop.now)) {
            context.stats.count("devices.identified")
            return entry
        }
        context.stats.count("devices.unknown")
        warn("device \(identifier)", "refused unknown device \(identifier) from \(peer): add it to devices (or set unknown_devices: \"accept\")")
        return nil
    }

    /// Logs a warning at most once a minute per key.
    func warn(_ key: String, _ message: String) {
        if let suppressed = logLimit.allow(key, now: Int64(loop.now)) {
            context.logger.warning(message + LogRateLimit.suffix(suppressed))
        }
    }
}
