import GatewayCore
import NMEA
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
        var backoff = Backoff(initial: configuration.reconnectInitial, cap: configuration.reconnectMax)
        let endpoint = "\(configuration.host):\(configuration.port)"
        var totals = NMEAStatistics()
        var health = configuration.health.map { ReceiverHealth(configuration: $0, source: context.id, logger: context.logger, stats: context.stats) }
        health?.watch(device: configuration.device, at: context.clock.now())
        while true {
            try Task.checkCancellation()
            do {
                let socket = try await Socket.connect(host: configuration.host, port: configuration.port,
                                                            timeout: configuration.connectTimeout, wakeup: wakeup)
                context.stats.count("tcp.connects")
                context.logger.info("connected to \(endpoint)")
                let received = try await read(socket, wakeup: wakeup, output: output, totals: &totals, health: &health)
                // A connection that delivered data was healthy: the next failure starts the backoff afresh.
                if received { backoff.reset() }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                if Task.isCancelled { throw CancellationError() }
                context.stats.count("tcp.connect_failures")
                context.logger.warning("\(error)")
            }
            let delay = backoff.next()
            context.logger.info("reconnecting to \(endpoint) in \(DurationText.format(delay))")
            if var h = health {
                defer { health = h }
                try await h.sleep(for: delay, clock: context.clock, output: output)
            } else {
                try await context.clock.sleep(for: delay)
            }
        }
    }

    /// Reads one connection until it ends, stalls or fails; true when any byte arrived.
    private func read(_ socket: Socket, wakeup: Wakeup, output: SourceOutput, totals: inout NMEAStatistics,
                      health: inout ReceiverHealth?) async throws -> Bool {
        var options = NMEAOptions()
        options.requireChecksum = configuration.requireChecksum
        options.source = context.id
        options.device = configuration.device
        options.idPrefix = "\(context.id)-"
        options.untimedToken = RunToken.next()
        var decoder = NMEADecoder(options: options)
        let base = totals
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var positions: [Position] = []
        var anyBytes = false
        var lastData = context.clock.now()
        var pending = false
        defer {
            totals = base.adding(decoder.statistics)
            totals.publish(to: context.stats)
        }
        while true {
            var wait = pending ? min(Self.idleFlush, configuration.stallTimeout) : configuration.stallTimeout
            // Health timers are checked at least this often.
            if health != nil { wait = min(wait, .milliseconds(200)) }
            let ready = await wakeup.wait([socket.fd], timeout: wait)
            try Task.checkCancellation()
            if health != nil {
                var events: [Position] = []
                health?.check(at: context.clock.now(), into: &events)
                await output.emit(events)
            }
            if ready.isEmpty {
                let quiet = context.clock.now().milliseconds - lastData.milliseconds
                if pending && quiet >= Self.idleFlush.milliseconds {
                    decoder.flushIdle(into: &positions)
                    pending = false
                    await emit(&positions, health: &health, output: output)
                }
                if quiet >= configuration.stallTimeout.milliseconds {
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
                pending = true
                lastData = context.clock.now()
                let before = decoder.statistics.wellFormed
                buffer.withUnsafeBytes { decoder.decode(UnsafeRawBufferPointer(rebasing: $0[0..<n]), into: &positions) }
                if health != nil {
                    var events: [Position] = []
                    if decoder.statistics.wellFormed > before {
                        health?.dataReceived(device: configuration.device, at: lastData, into: &events)
                    }
                    for status in decoder.takeAntennaReports() {
                        health?.antenna(status, device: configuration.device, at: lastData, into: &events)
                    }
                    await output.emit(events)
                }
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
