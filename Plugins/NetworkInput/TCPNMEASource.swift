import GatewayCore
import NMEA
import ReceiverStream
import StreamSessions
import SystemIO

/// Reads NMEA from a TCP server, reconnecting with capped exponential backoff.
///
/// One connection at a time; each connection gets a fresh decoder (a half sentence from the old
/// one must not join the new stream). Ids come from the fix time, so a reconnect does not
/// repeat them. No bytes for `stall_timeout` counts as a dead peer (`tcp.stalls`).
public struct TCPNMEASource: PositionSource {
    let configuration: TCPNMEAConfiguration
    let context: ComponentContext
    /// Without input for this long, the pending epoch is emitted.
    static let idleFlush: Duration = .seconds(1)

    public init(configuration: TCPNMEAConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    public func run(output: SourceOutput) async throws {
        let wakeup = try Wakeup()
        let endpoint = "\(configuration.host):\(configuration.port)"
        var totals = NMEAStatistics()
        var health = ReceiverHealth(configuration.health, context: context)
        health?.watch(device: configuration.device, at: context.clock.now())
        var loop = Reconnecting(backoff: Backoff(initial: configuration.reconnectInitial, cap: configuration.reconnectMax), clock: context.clock)
        try await loop.run(state: &health, health: \.self, output: output, session: { health in
            let socket = try await Socket.connect(host: configuration.host, port: configuration.port,
                                                  timeout: configuration.connectTimeout, wakeup: wakeup)
            context.stats.count("tcp.connects")
            context.logger.info("connected to \(endpoint)")
            // A connection that delivered data was healthy: the next failure starts the backoff afresh.
            return try await read(socket, wakeup: wakeup, output: output, totals: &totals, health: &health) ? .healthy : .unhealthy
        }, failed: { error in
            context.stats.count("tcp.connect_failures")
            context.logger.warning("\(error)")
        }, waiting: { delay in
            context.logger.info("reconnecting to \(endpoint) in \(DurationText.format(delay))")
        })
    }

    /// Reads one connection until it ends, stalls or fails; true when any byte arrived.
    private func read(_ socket: Socket, wakeup: Wakeup, output: SourceOutput, totals: inout NMEAStatistics,
                      health: inout ReceiverHealth?) async throws -> Bool {
        var decoder = ReceiverStreamDecoder(options: .live(source: context.id, device: configuration.device, requireChecksum: configuration.requireChecksum))
        let base = totals
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var positions: [Position] = []
        var anyBytes = false
        let clock = context.clock
        // Health timers are checked at least every 200 ms.
        var timers = QuietTimers(idleFlush: Self.idleFlush, stallTimeout: configuration.stallTimeout,
                                 tick: health != nil ? .milliseconds(200) : nil, now: clock.monotonicNow())
        defer {
            totals = base.adding(decoder.statistics)
            totals.publish(to: context.stats)
        }
        while true {
            let ready = await wakeup.readiness([socket.fd], timeout: timers.wait(at: clock.monotonicNow()), clock: clock)
            try Task.checkCancellation()
            if health != nil {
                var events: [Position] = []
                health?.check(at: clock.now(), into: &events)
                await output.emit(events)
            }
            if ready.isEmpty {
                let now = clock.monotonicNow()
                if timers.takeIdleFlush(at: now) {
                    decoder.flushIdle(into: &positions)
                    await emit(&positions, health: &health, output: output)
                }
                if timers.isStalled(at: now) {
                    context.stats.count("tcp.stalls")
                    context.logger.warning("no data for \(DurationText.format(configuration.stallTimeout)); reconnecting")
                    return anyBytes
                }
                continue
            }
            switch try socket.read(into: &buffer) {
            case .nothing:
                continue
            case .end:
                decoder.flush(into: &positions)
                await emit(&positions, health: &health, output: output)
                context.logger.warning("server closed the connection")
                return anyBytes
            case .bytes(let n):
                anyBytes = true
                timers.received(at: clock.monotonicNow())
                let wall = clock.now()
                let before = decoder.statistics.wellFormed
                buffer.withUnsafeBytes { decoder.decode(UnsafeRawBufferPointer(rebasing: $0[0..<n]), into: &positions) }
                var events: [Position] = []
                decoder.reportHealth(to: &health, device: configuration.device, wellFormedBefore: before, at: wall, into: &events)
                await output.emit(events)
                _ = decoder.takeAcknowledgements()
                await emit(&positions, health: &health, output: output)
                base.adding(decoder.statistics).publish(to: context.stats)
            }
        }
    }

    /// Emits decoded positions with the `fix_regained` events they cause.
    private func emit(_ positions: inout [Position], health: inout ReceiverHealth?, output: SourceOutput) async {
        guard !positions.isEmpty else { return }
        if health != nil {
            var out: [Position] = []
            health?.record(positions, at: context.clock.now(), into: &out)
            await output.emit(out)
        } else {
            await output.emit(positions)
        }
        positions.removeAll(keepingCapacity: true)
    }
}
