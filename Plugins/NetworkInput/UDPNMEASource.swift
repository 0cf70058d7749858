import GatewayCore
import NMEA
import ReceiverStream
import StreamSessions
import SystemIO

/// Listens for datagrams of NMEA, UBX and RTCM (``ReceiverStreamDecoder``, as the tcp source);
/// each sender gets its own decoder, so interleaved senders never mix sentences, frames or epochs,
/// and a UBX frame split over datagrams is joined again.
public struct UDPNMEASource: PositionSource {
    let configuration: UDPNMEAConfiguration
    let context: ComponentContext

    private struct Sender {
        var decoder: ReceiverStreamDecoder
        var lastSeen: MonotonicInstant
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
        var health = ReceiverHealth(configuration.health, context: context)
        if let d = configuration.device { health?.watch(device: d, at: context.clock.now()) }
        var events: [Position] = []
        let clock = context.clock
        // Health timers are checked at least every 200 ms; the idle flush is each sender's.
        var timers = QuietTimers(idleFlush: TCPNMEASource.idleFlush, stallTimeout: nil,
                                 tick: health != nil ? .milliseconds(200) : nil, now: clock.monotonicNow())
        while true {
            let ready = await wakeup.wait([socket.fd], timeout: timers.wait(at: clock.monotonicNow()), clock: clock)
            try Task.checkCancellation()
            let now = clock.monotonicNow()
            let wall = clock.now()
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
                        let options = NMEAOptions.live(source: context.id, device: configuration.device ?? sender,
                                                       requireChecksum: configuration.requireChecksum, idPrefix: "\(context.id)-\(sender)-")
                        senders[sender] = Sender(decoder: ReceiverStreamDecoder(options: options), lastSeen: now, pending: false)
                        context.logger.info("new sender \(sender)")
                    }
                    let before = senders[sender]?.decoder.statistics.wellFormed ?? 0
                    buffer.withUnsafeBytes { b in
                        senders[sender]?.decoder.decode(UnsafeRawBufferPointer(rebasing: b[0..<n]), into: &positions)
                    }
                    timers.received(at: now)
                    senders[sender]?.decoder.reportHealth(to: &health, device: configuration.device ?? sender, wellFormedBefore: before,
                                                          at: wall, into: &events)
                    if health != nil {
                        // This datagram's positions follow its events and precede the next
                        // datagram's, as a tcp source orders them per read.
                        health?.record(positions, at: wall, into: &events)
                        positions.removeAll(keepingCapacity: true)
                    }
                    // Nothing is written to a udp sender: acknowledgements have no one to wait for them.
                    _ = senders[sender]?.decoder.takeAcknowledgements()
                    senders[sender]?.lastSeen = now
                    senders[sender]?.pending = true
                }
            }
            // A sender quiet for the idle time has finished its epoch.
            for key in senders.keys where senders[key]?.pending == true {
                if let s = senders[key], now - s.lastSeen >= TCPNMEASource.idleFlush || ready.isEmpty {
                    senders[key]?.decoder.flushIdle(into: &positions)
                    senders[key]?.pending = false
                }
            }
            // Once every sender is flushed, the next wait lasts until a datagram or a tick.
            if !senders.values.contains(where: \.pending) { timers.flushed() }
            if health != nil {
                health?.record(positions, at: wall, into: &events)
                health?.check(at: clock.now(), into: &events)
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
