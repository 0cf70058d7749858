import GatewayCore
import NMEA
import PollWakeup

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
        let socket = try await SocketHandle.bindUDP(host: configuration.bind, port: configuration.port)
        context.logger.info("listening on \(configuration.bind):\(configuration.port)")
        var senders: [String: Sender] = [:]
        var retired = NMEAStatistics()
        // A datagram is at most 64 KiB.
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var positions: [Position] = []
        while true {
            let anyPending = senders.values.contains { $0.pending }
            let ready = await wakeup.wait([socket.fd], timeout: anyPending ? TCPNMEASource.idleFlush : .seconds(60))
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
                    buffer.withUnsafeBytes { b in
                        senders[sender]?.decoder.decode(UnsafeRawBufferPointer(rebasing: b[0..<n]), into: &positions)
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
            await output.emit(positions)
            positions.removeAll(keepingCapacity: true)
            senders.values.reduce(retired) { $0.adding($1.decoder.statistics) }.publish(to: context.stats)
            context.stats.set("udp.senders", senders.count)
        }
    }
}
