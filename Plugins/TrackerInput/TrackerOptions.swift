import DeviceIntake
import GatewayCore
import SystemIO
import TrackerProtocols

/// What the tracker sources (`teltonika`, `gt06`, `h02`, `jt808`) read alike: where to listen, the
/// limits, and who may send.
public struct TrackerSourceConfiguration: Sendable, Hashable {
    public var listener: ListenerConfiguration
    public var directory: DeviceDirectoryConfiguration
    /// `teltonika`'s `udp`: datagrams instead of connections.
    public var udp = false

    /// Reads the shared options of a tracker protocol.
    static func read(_ options: inout OptionReader, defaultListen: ListenAddress, maxFrameBytes: Int, udp: Bool = false) -> TrackerSourceConfiguration {
        let listener = ListenerConfiguration.read(&options, defaultListen: defaultListen, maxFrameBytes: maxFrameBytes)
        let directory = DeviceDirectoryConfiguration.read(&options)
        var c = TrackerSourceConfiguration(listener: listener, directory: directory)
        c.udp = udp
        return c
    }

    /// The shared options, documented.
    static func optionSpecs(defaultListen: ListenAddress, maxFrameBytes: Int, identifier: String = "IMEI") -> [OptionSpec] {
        ListenerConfiguration.optionSpecs(defaultListen: defaultListen, maxFrameBytes: maxFrameBytes)
            + DeviceDirectoryConfiguration.optionSpecs(identifier: identifier)
    }

    /// The listening source for a codec; `admissions` decides registrations (JT/T 808).
    func makeSource(protocolName: String, context: ComponentContext, admissions: (any DeviceAdmissions)? = nil,
                    codec: @escaping @Sendable () -> any TrackerCodec) -> ListeningSource {
        let transport: ListeningSource.Transport = udp
            ? .udp(listener.listen, maxDatagramBytes: listener.maxFrameBytes)
            : .tcp(listener)
        return ListeningSource(protocolName: protocolName, transport: transport, directory: directory, context: context,
                               admissions: admissions) { _ in codec() }
    }

    /// `validate`'s check: the devices file reads.
    func environmentFindings(context: EnvironmentContext) -> [EnvironmentFinding] {
        directory.environmentFindings(context: context) + listener.environmentFindings(context: context, udp: udp)
    }

    /// What two components cannot share.
    var claims: [String] {
        guard listener.listen.port != 0 else { return [] }
        return [udp ? "udp port \(listener.listen.port)" : "tcp port \(listener.listen.port)"]
    }
}
