import GatewayCore
import NMEA
import StreamSessions
import SystemIO

/// A gpsd client: connects, asks for reports, and turns them into positions.
///
/// It owns reconnection: gpsd not running yet, restarted, a dropped connection, or a
/// connection silent for `stall_timeout` all lead to a logged reconnect after a capped
/// exponential delay. Bad lines are counted in the component's stats and skipped.
public struct GpsdPositionSource: PositionSource {
    let configuration: GpsdSourceConfiguration
    let context: ComponentContext

    public init(configuration: GpsdSourceConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    /// The `?WATCH` command for the configuration.
    var watchCommand: String {
        var fields = [#""enable":true"#]
        switch configuration.mode {
        case .json: fields.append(#""json":true"#)
        case .nmea: fields.append(#""nmea":true"#)
        }
        if let d = configuration.device {
            var quoted: [UInt8] = []
            JSONWriter.appendString(d, to: &quoted)
            fields.append(#""device":"# + String(decoding: quoted, as: UTF8.self))
        }
        return "?WATCH={" + fields.joined(separator: ",") + "};\n"
    }

    /// Stops the reports between duty-cycle windows; gpsd closes the device once no client watches it.
    static let unwatchCommand = #"?WATCH={"enable":false};"# + "\n"

    /// With health events or a duty cycle, their timers are checked at least this often; without,
    /// a wait lasts until the next idle flush or the stall timeout. Cancellation ends any wait at once.
    static let timerTick: Duration = .milliseconds(200)
    /// How long connecting to one address, and sending one command, may take.
    static let ioTimeout: Duration = .seconds(5)

    /// Health and duty-cycle state that outlives connections.
    struct Watch {
        var health: ReceiverHealth?
        var selector: DutyWindowSelector?
        /// Whether this connection watches right now (false between duty-cycle windows).
        var watching = false
    }

    public func run(output: SourceOutput) async throws {
        let wakeup = try Wakeup()
        var stream = GpsdStream(configuration: configuration, source: context.id)
        var failures = 0
        let peer = "\(configuration.host):\(configuration.port)"
        var watch = Watch()
        watch.health = ReceiverHealth(configuration.health, context: context)
        watch.selector = configuration.dutyCycle.map { DutyWindowSelector(configuration: $0) }
        if let d = configuration.device { watch.health?.watch(device: d, at: context.clock.now()) }
        var problem = ""
        var loop = Reconnecting(backoff: Backoff(initial: .milliseconds(200), cap: configuration.reconnectMax), clock: context.clock)
        do {
            try await loop.run(state: &watch, health: \.health, output: output, session: { watch in
                var healthy = false
                do {
                    let socket = try await Socket.connect(
                        host: configuration.host, port: configuration.port, timeout: Self.ioTimeout, wakeup: wakeup)
                    watch.watching = false
                    if configuration.dutyCycle == nil {
                        try await socket.sendAll(Array(watchCommand.utf8), timeout: Self.ioTimeout, wakeup: wakeup)
                        watch.watching = true
                    }
                    context.logger.info("connected to gpsd at \(peer)\(failures > 0 ? " after \(failures) failed attempt(s)" : "")")
                    problem = try await session(socket, wakeup: wakeup, stream: &stream, watch: &watch, output: output) {
                        // The connection delivered reports: the next fault starts a fresh backoff.
                        healthy = true
                        failures = 0
                    }
                } catch is CancellationError {
                    await finish(&stream, watch: &watch, output: output)
                    throw CancellationError()
                } catch {
                    problem = "\(error)"
                }
                await finish(&stream, watch: &watch, output: output)
                failures += 1
                context.stats.count("gpsd.reconnects")
                return healthy ? .healthy : .unhealthy
            }, waiting: { delay in
                let message = "gpsd at \(peer): \(problem); reconnecting in \(DurationText.format(delay))"
                // The first failure of a streak is a warning; the rest are quieter so a long outage does not flood the log.
                if failures == 1 || failures % 20 == 0 { context.logger.warning(message) } else { context.logger.debug(message) }
            })
        } catch is CancellationError {
            return
        }
    }

    /// Reads until the connection ends or stalls; returns why it ended. Throws `CancellationError`.
    private func session(
        _ socket: Socket, wakeup: Wakeup, stream: inout GpsdStream, watch: inout Watch, output: SourceOutput, healthy: () -> Void
    ) async throws -> String {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        let clock = context.clock
        // Health and duty-cycle timers are looked at every tick.
        let ticks = watch.health != nil || configuration.dutyCycle != nil
        var timers = QuietTimers(idleFlush: configuration.idleFlush, stallTimeout: configuration.stallTimeout,
                                 tick: ticks ? Self.timerTick : nil, idleWait: Self.timerTick, now: clock.monotonicNow())
        var reported = false
        var out: [Position] = []
        while true {
            if Task.isCancelled { throw CancellationError() }
            if let duty = configuration.dutyCycle {
                let wall = context.clock.now()
                let inside = duty.schedule.phase(at: wall).inside
                if inside != watch.watching {
                    if !inside {
                        // The window ends: its open epochs and its best fix go out before the reports stop.
                        stream.endOfConnection(into: &out)
                        await deliver(&out, watch: &watch, output: output)
                        var best: [Position] = []
                        watch.selector?.close(into: &best)
                        await output.emit(best)
                        try await socket.sendAll(Array(Self.unwatchCommand.utf8), timeout: Self.ioTimeout, wakeup: wakeup)
                        for d in stream.devicesSeen { watch.health?.suspend(device: d, at: wall) }
                        context.stats.count("duty.unwatches")
                    } else {
                        try await socket.sendAll(Array(watchCommand.utf8), timeout: Self.ioTimeout, wakeup: wakeup)
                        for d in stream.devicesSeen { watch.health?.resume(device: d, at: wall) }
                        watch.selector?.reset()
                        context.stats.count("duty.windows")
                        timers.restart(at: clock.monotonicNow())
                    }
                    watch.watching = inside
                    context.logger.debug("duty cycle: \(inside ? "watching" : "stopped watching")")
                }
            }
            // Between duty-cycle windows gpsd is silent because it was asked to be: no stall then.
            let wait = timers.wait(at: clock.monotonicNow(), watchingStall: watch.watching)
            var ended: String?
            var result = Socket.ReadResult.nothing
            do {
                if !(await wakeup.readiness([socket.fd], timeout: wait, clock: clock)).isEmpty { result = try socket.read(into: &buffer) }
                try Task.checkCancellation()
            } catch let error as SystemError {
                ended = "\(error)"
            }
            let now = clock.monotonicNow()
            switch result {
            case .bytes(let n):
                timers.received(at: now)
                buffer.withUnsafeBytes { stream.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n]), now: now, into: &out) }
                stream.publish(to: context.stats, logger: context.logger)
                if !reported && stream.reports > 0 { reported = true; healthy() }
                if watch.health != nil {
                    let wall = context.clock.now()
                    var events: [Position] = []
                    for d in stream.takeDevicesHeard() { watch.health?.dataReceived(device: d, at: wall, into: &events) }
                    for (d, status) in stream.takeAntennaReports() { watch.health?.antenna(status, device: d, at: wall, into: &events) }
                    await output.emit(events)
                }
            case .nothing: break
            case .end: ended = "gpsd closed the connection"
            }
            stream.flushIdle(now: now, idle: configuration.idleFlush, into: &out)
            // Every device's last bytes are at most the last input: all of them are flushed by now.
            _ = timers.takeIdleFlush(at: now)
            await deliver(&out, watch: &watch, output: output)
            if watch.health != nil {
                var events: [Position] = []
                watch.health?.check(at: context.clock.now(), into: &events)
                await output.emit(events)
            }
            if let ended { return ended }
            if watch.watching && timers.isStalled(at: now) {
                return "no data for \(DurationText.format(configuration.stallTimeout))"
            }
        }
    }

    /// Adds health events to positions and applies the duty-cycle window, then emits.
    private func deliver(_ positions: inout [Position], watch: inout Watch, output: SourceOutput) async {
        guard !positions.isEmpty else { return }
        let out = DutyWindowSelector.emission(of: &positions, health: &watch.health, selector: &watch.selector,
                                              awake: watch.watching, now: context.clock.now(), stats: context.stats)
        await output.emit(out)
    }

    /// Emits what the ended connection left open.
    private func finish(_ stream: inout GpsdStream, watch: inout Watch, output: SourceOutput) async {
        var out: [Position] = []
        stream.endOfConnection(into: &out)
        stream.publish(to: context.stats, logger: context.logger)
        await deliver(&out, watch: &watch, output: output)
        if watch.watching {
            var best: [Position] = []
            watch.selector?.close(into: &best)
            await output.emit(best)
        }
    }
}

/// Everything between gpsd's bytes and positions, without I/O: line framing, report parsing,
/// epoch merging (json mode) or the NMEA engine (nmea mode), and the counters.
struct GpsdStream {
    /// Optional only so ``feed(_:now:into:)`` can move it out while lines are handled (no copy of its buffer).
    private var framer: GpsdLineFramer? = GpsdLineFramer()
    private var merger: GpsdEpochMerger
    private var nmea: NMEADecoder?
    private var lastNMEA: MonotonicInstant?
    /// Lines that parsed as a gpsd report.
    private(set) var reports = 0
    private(set) var badJSON = 0
    /// Messages worth a log line (gpsd ERROR reports, the first malformed lines), drained by ``publish(to:logger:)``.
    private var notes: [(LogLevel, String)] = []
    /// Device keys (as in the positions' `deviceKey`) that sent a report since the last ``takeDevicesHeard()``.
    private var heard: [String] = []
    /// Every device key that ever sent a report, in order.
    private(set) var devicesSeen: [String] = []
    /// Antenna statuses from relayed NMEA (nmea mode).
    private var antenna: [(String, AntennaStatus)] = []
    private let source: String
    private let defaultDevice: String?

    init(configuration: GpsdSourceConfiguration, source: String) {
        self.source = source
        defaultDevice = configuration.device
        merger = GpsdEpochMerger(source: source, defaultDevice: configuration.device)
        if configuration.mode == .nmea {
            nmea = NMEADecoder(options: .live(source: source, device: configuration.device))
        }
    }

    var tooLong: Int { framer?.tooLong ?? 0 }

    /// Devices heard since the last call.
    mutating func takeDevicesHeard() -> [String] {
        defer { heard.removeAll(keepingCapacity: true) }
        return heard
    }

    /// Antenna statuses (device, status) since the last call.
    mutating func takeAntennaReports() -> [(String, AntennaStatus)] {
        defer { antenna.removeAll(keepingCapacity: true) }
        return antenna
    }

    /// The key positions of `device` group under: the device, else the source id.
    private mutating func hear(_ device: String?) {
        let d = device ?? defaultDevice
        let key = (d?.isEmpty ?? true) ? source : (d ?? source)
        if !heard.contains(key) { heard.append(key) }
        if !devicesSeen.contains(key) { devicesSeen.append(key) }
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer, now: MonotonicInstant, into out: inout [Position]) {
        guard var framer = self.framer else { return }
        self.framer = nil
        framer.feed(bytes) { line in handle(line, now: now, into: &out) }
        self.framer = framer
    }

    /// Emits epochs whose device went quiet.
    mutating func flushIdle(now: MonotonicInstant, idle: Duration, into out: inout [Position]) {
        merger.flushIdle(now: now, idle: idle, into: &out)
        if nmea != nil, let last = lastNMEA, now - last >= idle {
            nmea?.flushIdle(into: &out)
            lastNMEA = nil
        }
    }

    /// The connection ended: emit open epochs and forget a partial line.
    mutating func endOfConnection(into out: inout [Position]) {
        merger.flushAll(into: &out)
        nmea?.flush(into: &out)
        lastNMEA = nil
        framer?.reset()
    }

    /// Copies the counters into the component's stats and writes pending log lines.
    mutating func publish(to stats: ComponentStats, logger: Logger) {
        stats.set("gpsd.reports", reports, kind: .counter)
        stats.set("gpsd.bad_json", badJSON, kind: .counter)
        stats.set("gpsd.too_long", tooLong, kind: .counter)
        stats.set("gpsd.untimed_tpv", merger.untimed, kind: .counter)
        stats.set("gpsd.late_tpv", merger.late, kind: .counter)
        nmea?.statistics.publish(to: stats)
        for (level, message) in notes { logger.log(level, message) }
        notes.removeAll()
    }

    private mutating func handle(_ line: UnsafeRawBufferPointer, now: MonotonicInstant, into out: inout [Position]) {
        if nmea != nil, line.first != UInt8(ascii: "{") {
            // Raw NMEA relayed by gpsd; the framer removed the line ending the NMEA framer needs.
            let before = nmea?.statistics.wellFormed ?? 0
            nmea?.decode(line, into: &out)
            let crlf: StaticString = "\r\n"
            nmea?.decode(UnsafeRawBufferPointer(start: crlf.utf8Start, count: crlf.utf8CodeUnitCount), into: &out)
            lastNMEA = now
            if (nmea?.statistics.wellFormed ?? 0) > before { hear(nil) }
            for status in nmea?.takeAntennaReports() ?? [] {
                antenna.append((defaultDevice ?? source, status))
            }
            return
        }
        let report: GpsdReport
        do { report = try GpsdReportParser.parse(line) } catch {
            badJSON += 1
            if badJSON <= 5 { notes.append((.warning, "skipped a line from gpsd: \(error)")) }
            return
        }
        reports += 1
        switch report {
        case .tpv(let tpv):
            if nmea == nil { hear(tpv.device) }
            // In nmea mode the NMEA engine makes the positions; gpsd's TPVs would duplicate them.
            if nmea == nil { merger.add(tpv, now: now, into: &out) }
        case .sky(let sky):
            if nmea == nil { hear(sky.device); merger.add(sky) }
        case .other(let className, let message):
            switch className {
            case "ERROR": notes.append((.warning, "gpsd error: \(message ?? "(no message)")"))
            case "VERSION": notes.append((.debug, "gpsd version \(message ?? "?")"))
            default: break
            }
        }
    }
}
