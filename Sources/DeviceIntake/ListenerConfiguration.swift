import GatewayCore
import SystemIO

/// What every listening TCP source shares: where it listens and the limits that keep hostile or
/// broken clients from costing more than a bounded share of the machine.
public struct ListenerConfiguration: Sendable, Hashable {
    public static let maxConnectionsOption = Option("max_connections", default: 10_000, in: 1...1_000_000,
        "Connections open at once; more are closed at once and counted (connections.refused.limit).")
    public static let maxConnectionsPerAddressOption = Option("max_connections_per_address", default: 1_000, in: 0...1_000_000,
        "Connections open at once from one IP address (0: no limit). Devices behind a carrier's NAT share addresses: raise it for large fleets.")
    public static let handshakeTimeoutOption = Option("handshake_timeout", default: Duration.seconds(30), minimum: .milliseconds(100),
        "A connection that has not identified its device within this is closed.")
    public static let idleTimeoutOption = Option("idle_timeout", default: Duration.seconds(900), minimum: .seconds(1),
        "A connection without a byte for this long is closed (devices reconnect).")
    public static let maxUnackedOption = Option("max_unacked", default: 1_000, in: 1...1_000_000,
        "Positions of one connection waiting for their commit; beyond it the connection is not read (TCP back-pressure), never dropped.")

    public var listen: ListenAddress
    /// Connections open at once; more are accepted and closed at once (counted).
    public var maxConnections = ListenerConfiguration.maxConnectionsOption.defaultValue
    /// Connections open at once from one IP address; 0 for no limit.
    public var maxConnectionsPerAddress = ListenerConfiguration.maxConnectionsPerAddressOption.defaultValue
    /// A connection that has not identified its device within this is closed.
    public var handshakeTimeout = ListenerConfiguration.handshakeTimeoutOption.defaultValue
    /// A connection without a byte for this long is closed.
    public var idleTimeout = ListenerConfiguration.idleTimeoutOption.defaultValue
    /// A frame longer than this is a bad frame (a length field is never trusted for an allocation).
    public var maxFrameBytes: Int
    /// Positions of one connection waiting for their commit; beyond, the connection is not read.
    public var maxUnacked = ListenerConfiguration.maxUnackedOption.defaultValue

    public init(listen: ListenAddress, maxFrameBytes: Int) {
        self.listen = listen
        self.maxFrameBytes = maxFrameBytes
    }

    /// `listen`, whose default is the protocol's address.
    static func listenOption(_ protocolDefault: ListenAddress) -> Option<ListenAddress> {
        Option("listen", default: protocolDefault,
               "Address and port to listen on; \"0.0.0.0:\(protocolDefault.port)\" (or \"[::]:…\") to reach devices on the network.")
    }

    /// `max_frame_bytes`, whose default is the protocol's.
    static func maxFrameBytesOption(_ protocolDefault: Int) -> Option<Int> {
        Option("max_frame_bytes", default: protocolDefault, in: 64...(16 << 20),
               "A frame longer than this is a bad frame (counted, never answered, never allocated).")
    }

    /// The options, with a protocol's default address and frame limit.
    public static func optionSpecs(defaultListen: ListenAddress, maxFrameBytes: Int, handshake: Bool = true) -> [OptionSpec] {
        var specs = [
            listenOption(defaultListen).spec,
            maxConnectionsOption.spec,
            maxConnectionsPerAddressOption.spec,
        ]
        if handshake {
            specs.append(handshakeTimeoutOption.spec)
        }
        specs += [
            idleTimeoutOption.spec,
            maxFrameBytesOption(maxFrameBytes).spec,
            maxUnackedOption.spec,
        ]
        return specs
    }

    /// Reads the options; problems go to the reader.
    public static func read(_ options: inout OptionReader, defaultListen: ListenAddress, maxFrameBytes: Int, handshake: Bool = true) -> ListenerConfiguration {
        var c = ListenerConfiguration(listen: options.read(listenOption(defaultListen)), maxFrameBytes: maxFrameBytes)
        c.maxConnections = options.read(maxConnectionsOption)
        c.maxConnectionsPerAddress = options.read(maxConnectionsPerAddressOption)
        if handshake {
            c.handshakeTimeout = options.read(handshakeTimeoutOption)
        }
        c.idleTimeout = options.read(idleTimeoutOption)
        c.maxFrameBytes = options.read(maxFrameBytesOption(maxFrameBytes))
        c.maxUnacked = options.read(maxUnackedOption)
        return c
    }

    /// `validate`'s check of the address: a warning when it cannot be listened on now (another
    /// program holds the port — or this pipeline, already running —, the address is not this
    /// machine's, the port needs privileges).
    public func environmentFindings(context: EnvironmentContext, udp: Bool = false) -> [EnvironmentFinding] {
        ListenerConfiguration.listenFindings(listen, context: context, udp: udp)
    }

    /// The check of ``environmentFindings(context:udp:)`` for any listening address.
    public static func listenFindings(_ address: ListenAddress, context: EnvironmentContext, udp: Bool = false) -> [EnvironmentFinding] {
        guard address.port != 0, let problem = Socket.listenProblem(host: address.host, port: address.port, udp: udp) else { return [] }
        return [context.warning("listen", "\(problem) (another program, or this pipeline already running, holds it)")]
    }

    /// What two components cannot share (port 0 takes any free port: nothing to claim).
    public var claims: [String] { listen.port == 0 ? [] : ["tcp port \(listen.port)"] }
}
