import GatewayCore
import SystemIO
import TrackerProtocols

/// A source that devices connect to: a TCP listener (or a UDP endpoint) on the process's I/O
/// loop, a codec per connection, and the pipeline behind an inbox.
///
/// `run` binds, then emits whatever the inbox holds as one batch at a time, each with an
/// end-to-end acknowledgement that lets the waiting devices' answers go out. Cancelled, it
/// closes the socket and every connection: answers still owed are never written, so the
/// devices send those positions again.
public struct ListeningSource: PositionSource {
    /// TCP with a codec per connection, or UDP with one codec for every datagram.
    public enum Transport: Sendable {
        case tcp(ListenerConfiguration)
        case udp(ListenAddress, maxDatagramBytes: Int)
    }

    public let transport: Transport
    public let directory: DeviceDirectoryConfiguration
    public let context: ComponentContext
    let makeCodec: @Sendable (SocketAddress) -> any TrackerCodec
    let identifyAtAccept: (@Sendable (SocketAddress) -> String?)?
    let admissions: (any DeviceAdmissions)?
    let protocolName: String
    let loop: EventLoop
    /// Where the connections' positions (and command events) wait for the source's task.
    let inbox: DeviceInbox

    /// `protocolName` names the protocol in the log (`teltonika`); `identifyAtAccept` names a
    /// TCP connection's device when it is accepted, for protocols without identification.
    /// `makeCodec` gets the peer's address (`.unspecified` over UDP, where one codec reads every
    /// datagram). `admissions` decides registrations and authentications (JT/T 808).
    public init(protocolName: String, transport: Transport, directory: DeviceDirectoryConfiguration, context: ComponentContext,
                loop: EventLoop = .shared, identifyAtAccept: (@Sendable (SocketAddress) -> String?)? = nil,
                admissions: (any DeviceAdmissions)? = nil,
                makeCodec: @escaping @Sendable (SocketAddress) -> any TrackerCodec) {
        self.admissions = admissions
        self.protocolName = protocolName
        self.transport = transport
        self.directory = directory
        self.context = context
        self.loop = loop
        self.identifyAtAccept = identifyAtAccept
        self.makeCodec = makeCodec
        inbox = DeviceInbox()
        // Known to the command center from the start, so a command submitted before the socket
        // is bound is taken (devices in a file are added when it is read).
        if let commands = context.commands {
            // Commands go on TCP connections; a datagram source takes none (refused when submitted).
            let types: Set<CommandType> = if case .tcp = transport { makeCodec(.unspecified).commandTypes } else { [] }
            let stats = context.stats, inbox = self.inbox
            commands.register(source: context.id, types: types) { event in
                if let status = event.event?.status { stats.count("commands.\(status)") }
                inbox.put(DeviceInbox.Delivery(positions: [event]) {})
            }
            commands.knows(devices: directory.entries.values.map(\.name), source: context.id)
        }
    }

    public func run(output: SourceOutput) async throws {
        let devices: DeviceDirectory
        do {
            devices = try DeviceDirectory(directory, logger: context.logger)
        } catch {
            throw ListeningSourceError(description: "devices: \(error)")
        }
        let started: any StartedListener
        switch transport {
        case .tcp(let configuration):
            let listener = TrackerListener(loop: loop, configuration: configuration, directory: devices, inbox: inbox, context: context,
                                           identifyAtAccept: identifyAtAccept, admissions: admissions, protocolName: protocolName,
                                           makeCodec: makeCodec)
            try await loop.perform { try listener.start() }
            started = listener
            let limit = EventLoop.openFileLimit
            if configuration.maxConnections > limit {
                context.logger.warning("max_connections is \(configuration.maxConnections) but this process may open only \(limit) files: raise LimitNOFILE (systemd) or ulimit -n")
            }
        case .udp(let address, let maxBytes):
            let listener = DatagramListener(loop: loop, listen: address, maxDatagramBytes: maxBytes, directory: devices, inbox: inbox,
                                            context: context, admissions: admissions, codec: makeCodec(.unspecified))
            try await loop.perform { try listener.start() }
            started = listener
        }
        if let commands = context.commands, directory.file != nil { commands.knows(devices: devices.names, source: context.id) }
        let kind: String = if case .udp = transport { "UDP" } else { "TCP" }
        context.logger.info("listening for \(protocolName) devices on \(kind) \(started.boundAddress)\(directory.acceptUnknown ? " (unknown devices accepted)" : "")")
        await inbox.pump(into: output) { [loop] in loop.execute { started.inboxDrained() } }
        try? await loop.perform { started.stop() }
        throw CancellationError()
    }
}

/// A listening source that cannot start (its devices file is unusable).
public struct ListeningSourceError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// What the source needs of either listener.
protocol StartedListener: Sendable {
    var boundAddress: SocketAddress { get }
    func inboxDrained()
    func stop()
}

extension TrackerListener: StartedListener {
    var boundAddress: SocketAddress { address }
}

extension DatagramListener: StartedListener {
    var boundAddress: SocketAddress { address }
}
