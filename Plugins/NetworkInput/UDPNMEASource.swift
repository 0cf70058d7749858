import GatewayCore
import NMEA
import SystemIO

/// Listens for NMEA datagrams; each sender gets its own decoder, so interleaved senders never
/// mix sentences or epochs.
public struct UDPNMEASource: PositionSource {
    let configuration: UDPNMEAConfiguration
    let context: ComponentContext

    private struct Sender {
        var decoder: NMEADecoder
        var lastSeen: Int64
        var pending: Bool
    }

    public init(configuration: UDPNMEAConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    public func run(output: SourceOutput) async throws {
        let wakeup = try Wakeup()
        // A port that cannot be bound is a configuration fault that retrying does not fix: throw.
        let socket = try await Socket.bindUDP(host: configuration.bind, port: configuration.port)
        context.logger.info("listening on \(configuration.bind):\(configuration.port)")
        var senders: [String: Sender] = [:]
        var retired = NMEAStatistics()
        // A datagram is at most 64 KiB.
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var positions: [Position] = []
        var health = configuration.health.map { ReceiverHealth(configuration: $0, source: context.id, logger: context.logger, stats: context.stats) }
        if let d = configuration.device { health?.watch(device: d, at: context.clock.now()) }
        var events: [Position] = []
        while true {
            let anyPending = senders.values.contains { $0.pending }
            var wait = anyPending ? TCPNMEASource.idleFlush : .seconds(60)
            // Health timers are checked at least this often.
            if health != nil { wait = min(wait, .milliseconds(200)) }
            let ready = await wakeup.wait([socket.fd], timeout: wait)
            try Task.checkCancellation()
            let now = context.clock.now().milliseconds
            if !ready.isEmpty {
                // Drain what is queued, a bounded number at a time so flushing and cancellation stay prompt.
                for _ in 0..<256 {
                    guard let (n, sender) = try socket.receive(into: &buffer) else { break }
                    context.stats.count("udp.datagrams")
                    if senders[sender] == nil {
                        if senders.count >= configuration.maxSenders, let oldest = senders.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
                            var d = oldest.value.decoder
                            d.flush(into: &positions)
                            retired = retired.adding(d.statistics)
                            senders[oldest.key] = nil
                            context.stats.count("udp.senders_forgotten")
                        }
                        var options = NMEAOptions()
                        options.requireChecksum = configuration.requireChecksum
                        options.source = context.id
                        options.device = configuration.device ?? sender
                        options.idPrefix = "\(context.id)-\(sender)-"
                        options.untimedToken = RunToken.next()
                        senders[sender] = Sender(decoder: NMEADecoder(options: options), lastSeen: now, pending: false)
                        context.logger.info("new sender \(sender)")
                    }
                    let before = senders[sender]?.decoder.statistics.wellFormed ?? 0
                    buffer.withUnsafeBytes { b in
                        senders[sender]?.decoder.decode(UnsafeRawBufferPointer(rebasing: b[0..<n]), into: &positions)
                    }
                    if health != nil {
                        let device = configuration.device ?? sender
                        let stamp = Timestamp(milliseconds: now)
                        if (senders[sender]?.decoder.statistics.wellFormed ?? 0) > before {
                            health?.dataReceived(device: device, at: stamp, into: &events)
                        }
                        for status in senders[sender]?.decoder.takeAntennaReports() ?? [] {
                            health?.antenna(status, device: device, at: stamp, into: &events)
                        }
                        // This datagram's positions follow its events and precede the next
                        // datagram's, as a tcp source orders them per read.
                        health?.record(positions, at: stamp, into: &events)
                        positions.removeAll(keepingCapacity: true)
                    }
                    senders[sender]?.lastSeen = now
                    senders[sender]?.pending = true
                }
            }
            // A sender quiet for the idle time has finished its epoch.
            for key in senders.keys where senders[key]?.pending == true {
                if let s = senders[key], now - s.lastSeen >= TCPNMEASource.idleFlush.milliseconds || ready.isEmpty {
                    senders[key]?.decoder.flushIdle(into: &positions)
                    senders[key]?.pending = false
                }
            }
            if health != nil {
                health?.record(positions, at: Timestamp(milliseconds: now), into: &events)
                health?.check(at: context.clock.now(), into: &events)
                await output.emit(events)
                events.removeAll(keepingCapacity: true)
            } else {
                await output.emit(positions)
            }
            positions.removeAll(keepingCapacity: true)
            senders.values.reduce(retired) { $0.adding($1.decoder.statistics) }.publish(to: context.stats)
            context.stats.set("udp.senders", senders.count)
        }
    }
}
