import GatewayCore
import NMEA
import NTRIP
import ReceiverSetup
import ReceiverStream
import StreamSessions
import SerialPorts
import SystemIO

/// Reads a receiver on a serial port until cancelled — NMEA, u-blox UBX and RTCM 3 on one stream
/// (``ReceiverStreamDecoder``) — reconnecting after every fault.
///
/// One session = open (resolving `match` anew), configure, detect the baud rate if asked, write
/// the init lines, then read until a fault: the device hangs up (unplug), no bytes for
/// `stall_timeout`, or a read error. Every fault is logged with what to do about it, the port is
/// closed, and the next attempt waits with capped exponential backoff. One ``NMEADecoder`` lives
/// across sessions, so position ids and statistics continue.
///
/// Reads wait on the port's descriptor through a ``Wakeup`` (so cancellation ends a wait at once)
/// and then take what is there without blocking; the calls that block inside libserialport (open,
/// configure, write) run through ``BlockingWork``. Neither holds a cooperative thread: on a small
/// machine with a few receivers that would stall the sinks.
///
/// With `corrections`, an NTRIP client runs beside the sessions (a child task); its RTCM frames
/// wait in a queue that wakes the read loop, which writes them to the port between its reads:
/// this task alone touches the port, so a frame is never cut by another write. UBX messages of
/// `init` are sent after the text lines at every open, one at a time, each awaiting its ACK.
public struct SerialNMEASource: PositionSource {
    let configuration: SerialSourceConfiguration
    let context: ComponentContext

    /// With health events or a duty cycle, their timers are checked at least this often; without,
    /// a wait lasts until the idle flush or the stall timeout is due. Cancellation ends any wait at once.
    static let timerTick: Duration = .milliseconds(200)
    /// A line this long without bytes ends the epoch in progress, so it is not held until the next.
    static let idleFlush: Duration = .milliseconds(300)
    /// How long each rate is listened to when the baud rate is detected.
    static let probeWindow: Duration = .seconds(2)

    public init(configuration: SerialSourceConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    /// An open port and what positions are labelled with.
    struct Session {
        let port: SerialPortHandle
        /// The configured path or the matched port, for log lines.
        let name: String
        let device: String
        /// Bytes read while detecting the baud rate, decoded before anything else.
        var pending: [UInt8]
    }

    /// Why a session ended, other than a port error.
    struct Stall: Error {}
    /// Duty cycling with method `close`: the window ended, the port is closed until the next one.
    struct WindowEnded: Error {}

    /// Health and duty-cycle state that outlives sessions.
    struct Watch {
        var health: ReceiverHealth?
        var selector: DutyWindowSelector?
        /// Whether the receiver is awake as far as the duty cycle knows; nil before the first decision of a session.
        var awake: Bool?
        /// The device the health events are about (the current or last session's).
        var device: String?
    }

    public func run(output: SourceOutput) async throws {
        let wakeup = try Wakeup()
        guard let ntrip = configuration.corrections else { return try await run(output: output, wakeup: wakeup, corrections: nil) }
        let feed = CorrectionsFeed(configuration: ntrip, clock: context.clock, logger: context.logger, stats: context.stats,
                                   wake: { wakeup.signal() })
        // The client lives as long as the source, across port sessions; ending the source ends it.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await feed.run() }
            try await run(output: output, wakeup: wakeup, corrections: feed)
            group.cancelAll()
        }
    }

    private func run(output: SourceOutput, wakeup: Wakeup, corrections: CorrectionsFeed?) async throws {
        // Positions get their device when they go out (the port's, found when it opens).
        var decoder = ReceiverStreamDecoder(options: .live(source: context.id, device: nil, requireChecksum: configuration.requireChecksum))
        var watch = Watch()
        watch.health = ReceiverHealth(configuration.health, context: context)
        watch.selector = configuration.dutyCycle.map { DutyWindowSelector(configuration: $0) }
        if let d = configuration.device {
            // A configured id is known before the port opens: an absent receiver is reported too.
            watch.device = d
            watch.health?.watch(device: d, at: context.clock.now())
        }
        var settledBaud: Int?
        var lastFault = ""
        var sessions = 0
        var loop = Reconnecting(backoff: Backoff(initial: .milliseconds(200), cap: configuration.backoffCap), clock: context.clock)
        try await loop.run(state: &watch, health: \.health, output: output, session: { watch in
            if let duty = configuration.dutyCycle, duty.method == .close {
                try await waitForWindow(duty, watch: &watch, output: output)
            }
            var device: String?
            // The port works again once bytes arrive: the next fault starts the backoff from the beginning.
            var delivered = false
            do {
                var session = try await open(wakeup: wakeup, settledBaud: &settledBaud)
                device = session.device
                watch.device = session.device
                watch.awake = nil
                watch.health?.watch(device: session.device, at: context.clock.now())
                sessions += 1
                if sessions > 1 && configuration.dutyCycle?.method != .close { context.stats.count("serial.reconnects") }
                lastFault = ""
                try await read(&session, wakeup: wakeup, decoder: &decoder, watch: &watch, output: output, delivered: &delivered,
                               corrections: corrections)
            } catch is WindowEnded {
                await flush(&decoder, device: device, watch: &watch, output: output)
                return .reopen
            } catch let error as SerialPortError {
                let message = explain(error)
                report(message, repeated: message == lastFault, kind: error.kind)
                lastFault = message
            } catch is Stall {
                context.stats.count("serial.stalls")
                let message = "no data for \(DurationText.format(configuration.stallTimeout)) (stall_timeout): closing and reconnecting"
                context.logger.warning(message)
                lastFault = message
            } catch {
                // Cancellation: release the epoch in progress rather than lose it.
                await flush(&decoder, device: device, watch: &watch, output: output)
                throw error
            }
            await flush(&decoder, device: device, watch: &watch, output: output)
            return delivered ? .healthy : .unhealthy
        }, waiting: { delay in
            context.logger.debug("next attempt in \(DurationText.format(delay))")
        })
    }

    /// Method `close`: outside a window, the port stays closed until the next one starts.
    private func waitForWindow(_ duty: DutyCycleConfiguration, watch: inout Watch, output: SourceOutput) async throws {
        let now = context.clock.now()
        let phase = duty.schedule.phase(at: now)
        guard !phase.inside else { return }
        if let d = watch.device { watch.health?.suspend(device: d, at: now) }
        context.logger.debug("duty cycle: port closed until \(phase.nextStart)")
        try await context.clock.sleep(for: .milliseconds(phase.nextStart.milliseconds - now.milliseconds))
        context.stats.count("duty.windows")
        if let d = watch.device { watch.health?.resume(device: d, at: context.clock.now()) }
        watch.selector?.reset()
    }

    // MARK: - Opening

    private func open(wakeup: Wakeup, settledBaud: inout Int?) async throws -> Session {
        let target: String
        let name: String
        switch configuration.selector {
        case .path(let p):
            target = p
            name = p
        case .match(let m):
            let ports = try await BlockingWork.run { () throws(SerialPortError) in try SerialPortInfo.list() }
            let found = ports.filter(m.matches)
            guard let first = found.first else {
                throw SerialPortError(kind: .missing, operation: "find a port matching \(m.text)",
                                      detail: "none of the \(ports.count) port(s) listed matches")
            }
            if found.count > 1 {
                context.logger.warning("\(found.count) ports match \(m.text) (\(found.map(\.path).joined(separator: ", "))); using \(first.path)")
            }
            target = first.path
            name = "\(first.path) (matching \(m.text))"
        }
        let line = configuration.line
        let port = try await BlockingWork.run { () throws(SerialPortError) -> SerialPortHandle in
            let port = try SerialPortHandle(path: target)
            try port.apply(line)
            return port
        }
        let device = configuration.device ?? port.info.serialNumber ?? target
        var session = Session(port: port, name: name, device: device, pending: [])
        var baud = configuration.line.baud
        if configuration.baud == nil {
            let (rate, bytes) = try await detectBaud(port, wakeup: wakeup, first: settledBaud)
            settledBaud = rate
            baud = rate
            session.pending = bytes
        }
        let initBytes = configuration.initBytes
        if !initBytes.isEmpty {
            let written = try await BlockingWork.run { () throws(SerialPortError) in try port.write(initBytes, timeoutMilliseconds: 2000) }
            if written < initBytes.count {
                context.logger.warning("\(target): wrote only \(written) of \(initBytes.count) init bytes (flow control holding the line?)")
            }
        }
        var what = "opened \(name)"
        if port.info.path != target { what += " (\(port.info.path))" }
        what += " at \(baud) baud, \(configuration.line.dataBits)\(configuration.line.parity.rawValue.prefix(1).uppercased())\(configuration.line.stopBits)"
        if port.info.transport == .usb, let v = port.info.vendorID, let p = port.info.productID {
            what += ", USB \(hex4(v)):\(hex4(p))"
            if let product = port.info.product { what += " \(product)" }
            if let serial = port.info.serialNumber { what += " serial \(serial)" }
        }
        what += "; device id \(device)"
        context.logger.info(what)
        return session
    }

    /// Tries each rate until one yields checksum-valid sentences; returns it and the bytes read at it.
    private func detectBaud(_ port: SerialPortHandle, wakeup: Wakeup, first: Int?) async throws -> (Int, [UInt8]) {
        var rates = SerialSourceConfiguration.autoBaudRates
        if let f = first, let i = rates.firstIndex(of: f) { rates.remove(at: i); rates.insert(f, at: 0) }
        var options = NMEAOptions()
        options.requireChecksum = true
        for rate in rates {
            try await BlockingWork.run { () throws(SerialPortError) in try port.setBaud(rate) }
            // NMEA or UBX: a receiver set to UBX only is found too.
            var probe = ReceiverStreamDecoder(options: options)
            var seen: [UInt8] = []
            var scratch: [Position] = []
            let deadline = context.clock.monotonicNow() + SerialNMEASource.probeWindow
            while context.clock.monotonicNow() < deadline {
                try Task.checkCancellation()
                let bytes = try await readChunk(port, wakeup: wakeup)
                guard !bytes.isEmpty else { continue }
                seen += bytes
                bytes.withUnsafeBytes { probe.decode($0, into: &scratch) }
                let s = probe.statistics
                // Two UBX frames, not one: a 16-bit checksum matches line noise once in 65,536 tries.
                if s.accepted + s.unknown + s.proprietary > 0 || s.ubxFrames >= 2 {
                    context.logger.info("baud auto: \(rate) yields \(s.ubxFrames >= 2 ? "UBX" : "NMEA")")
                    return (rate, seen)
                }
            }
            context.logger.debug("baud auto: nothing valid at \(rate)")
        }
        throw SerialPortError(kind: .failed, operation: "detect the baud rate",
                              detail: "no NMEA or UBX at any of \(rates.map(String.init).joined(separator: ", ")) baud (is the receiver sending? set baud explicitly)")
    }

    // MARK: - Reading

    private func read(_ session: inout Session, wakeup: Wakeup, decoder: inout ReceiverStreamDecoder, watch: inout Watch,
                      output: SourceOutput, delivered: inout Bool, corrections: CorrectionsFeed?) async throws {
        var positions: [Position] = []
        let clock = context.clock
        // Corrections queued while the port was closed are stale: the receiver gets fresh ones.
        corrections?.queue.discard()
        if !configuration.ubxInit.isEmpty {
            // At every open, after the text lines; the receiver's output meanwhile is decoded as usual.
            let link = SerialReceiverLink(port: session.port, wakeup: wakeup, source: self)
            let outcomes = try await ReceiverConfigurator.run(configuration.ubxInit, link: link, decoder: &decoder, positions: &positions,
                                                              clock: clock, logger: context.logger, stats: context.stats)
            if outcomes.contains(.notWritten) { throw SerialPortError(kind: .failed, operation: "write the UBX init messages", detail: "the port failed") }
            if !positions.isEmpty { delivered = true }
            corrections?.note(positions)
            await deliver(&positions, device: session.device, watch: &watch, output: output)
        }
        // Health and duty-cycle timers are looked at every tick; without them a wait lasts until
        // the idle flush or the stall is due.
        var timers = QuietTimers(idleFlush: SerialNMEASource.idleFlush, stallTimeout: configuration.stallTimeout,
                                 tick: watch.health != nil || configuration.dutyCycle != nil ? SerialNMEASource.timerTick : nil,
                                 now: clock.monotonicNow())
        if !session.pending.isEmpty {
            session.pending.withUnsafeBytes { decoder.decode($0, into: &positions) }
            session.pending = []
            timers.received(at: clock.monotonicNow())
        }
        if configuration.dutyCycle?.method == .close { watch.awake = true }
        while true {
            if Task.isCancelled { throw CancellationError() }
            // An asleep receiver is silent on purpose: no stall then.
            var timeout = timers.wait(at: clock.monotonicNow(), watchingStall: watch.awake != false)
            if let duty = configuration.dutyCycle {
                let now = clock.now()
                let phase = duty.schedule.phase(at: now)
                if watch.awake != phase.inside {
                    if watch.awake == true {
                        // The window ends: what the receiver said last still belongs to it.
                        decoder.flushIdle(into: &positions)
                        timers.flushed()
                        await deliver(&positions, device: session.device, watch: &watch, output: output)
                        var best: [Position] = []
                        watch.selector?.close(into: &best)
                        await output.emit(best)
                    }
                    try await switchPower(awake: phase.inside, session: session, watch: &watch)
                    if phase.inside { timers.restart(at: clock.monotonicNow()) }
                }
                let next = phase.inside ? phase.end : phase.nextStart
                let untilBoundary = max(1, next.milliseconds - clock.now().milliseconds)
                timeout = min(timeout, .milliseconds(untilBoundary))
            }
            let bytes = try await readChunk(session.port, wakeup: wakeup, timeout: timeout)
            if let corrections { try await writeCorrections(corrections, to: session.port, wakeup: wakeup) }
            let now = clock.monotonicNow()
            if bytes.isEmpty {
                if timers.takeIdleFlush(at: now) { decoder.flushIdle(into: &positions) }
                if watch.awake != false && timers.isStalled(at: now) { throw Stall() }
            } else {
                timers.received(at: now)
                delivered = true
                let before = decoder.statistics.wellFormed
                bytes.withUnsafeBytes { decoder.decode($0, into: &positions) }
                decoder.statistics.publish(to: context.stats)
                var events: [Position] = []
                decoder.reportHealth(to: &watch.health, device: session.device, wellFormedBefore: before, at: clock.now(), into: &events)
                await output.emit(events)
                // ACKs of the init messages that came late: already reported as unanswered.
                _ = decoder.takeAcknowledgements()
                if let age = decoder.correctionAge { context.stats.set("ubx.correction_age_s", age) }
                corrections?.note(positions)
            }
            await deliver(&positions, device: session.device, watch: &watch, output: output)
            var events: [Position] = []
            watch.health?.check(at: clock.now(), into: &events)
            await output.emit(events)
        }
    }

    /// Labels decoded positions with the device, adds health events and applies the duty-cycle window, then emits.
    private func deliver(_ positions: inout [Position], device: String, watch: inout Watch, output: SourceOutput) async {
        guard !positions.isEmpty else { return }
        for i in positions.indices { positions[i].device = device }
        let out = DutyWindowSelector.emission(of: &positions, health: &watch.health, selector: &watch.selector,
                                              awake: watch.awake != false, now: context.clock.now(), stats: context.stats)
        await output.emit(out)
    }

    /// Writes the sleep or wake bytes (or only records the state, for method `close`).
    private func switchPower(awake: Bool, session: Session, watch: inout Watch) async throws {
        guard let duty = configuration.dutyCycle else { return }
        let now = context.clock.now()
        watch.awake = awake
        if awake {
            watch.selector?.reset()
            watch.health?.resume(device: session.device, at: now)
            context.stats.count("duty.windows")
        } else {
            watch.health?.suspend(device: session.device, at: now)
        }
        if duty.method == .close {
            if !awake { throw WindowEnded() }
            return
        }
        let bytes = awake ? ReceiverPowerCommands.wake(duty) : ReceiverPowerCommands.sleep(duty)
        let port = session.port
        let written = try await BlockingWork.run { () throws(SerialPortError) in try port.write(bytes, timeoutMilliseconds: 1000) }
        context.stats.count(awake ? "duty.wakes" : "duty.sleeps")
        context.logger.debug("duty cycle: \(awake ? "woke" : "put to sleep") the receiver (\(written) byte(s), method \(duty.method?.rawValue ?? "-"))")
    }

    /// Writes the corrections waiting in the queue, whole frames in order, between two reads.
    private func writeCorrections(_ corrections: CorrectionsFeed, to port: SerialPortHandle, wakeup: Wakeup) async throws {
        // Cleared before taking: a frame queued after this is signalled again and wakes the next wait.
        wakeup.clear()
        let bytes = corrections.take()
        guard !bytes.isEmpty else { return }
        let written = try await BlockingWork.run { () throws(SerialPortError) in try port.write(bytes, timeoutMilliseconds: 1000) }
        context.stats.count("corrections.bytes_written", by: written)
        if written < bytes.count {
            context.stats.count("corrections.bytes_not_written", by: bytes.count - written)
            context.logger.warning("corrections: wrote only \(written) of \(bytes.count) bytes (the receiver's baud rate too low for the stream, or flow control holding the line)")
        }
    }

    /// Waits up to `timeout` for input and reads what is there; empty when nothing arrived.
    fileprivate func readChunk(_ port: SerialPortHandle, wakeup: Wakeup, timeout: Duration = SerialNMEASource.timerTick) async throws -> [UInt8] {
        let ready = await wakeup.readiness([port.descriptor], timeout: timeout, clock: context.clock)
        try Task.checkCancellation()
        guard let ready = ready.first else { return [] }
        return try [UInt8](unsafeUninitializedCapacity: 4096) { buffer, count in
            count = try port.read(into: UnsafeMutableRawBufferPointer(buffer), ready: ready)
        }
    }

    private func flush(_ decoder: inout ReceiverStreamDecoder, device: String?, watch: inout Watch, output: SourceOutput) async {
        var positions: [Position] = []
        decoder.flush(into: &positions)
        decoder.statistics.publish(to: context.stats)
        if let device {
            await deliver(&positions, device: device, watch: &watch, output: output)
        } else {
            await output.emit(positions)
        }
        if watch.awake == true {
            // The window is cut short (close, cancellation): its fallback fix is not lost.
            var best: [Position] = []
            watch.selector?.close(into: &best)
            await output.emit(best)
        }
    }

    // MARK: - Faults

    /// A log line that says what happened and what to do.
    func explain(_ error: SerialPortError) -> String {
        let hint: String = switch error.kind {
        case .missing: "no such device — is the receiver plugged in? `locgate ports` lists the ports present"
        case .permissionDenied: "permission denied — add the user to group dialout (`sudo usermod -aG dialout $USER`, then log in again)"
        case .busy: "port busy — another process holds it (find it with `fuser -v <port>`; gpsd or ModemManager?)"
        case .disconnected: "device disconnected (unplugged?)"
        case .unsupported: "cannot be opened as a serial port"
        case .failed: "failed"
        }
        return "\(error): \(hint); retrying with backoff up to \(DurationText.format(configuration.backoffCap))"
    }

    private func report(_ message: String, repeated: Bool, kind: SerialPortError.Kind) {
        context.stats.count(kind == .disconnected ? "serial.disconnects" : "serial.open_failures")
        // A receiver left unplugged overnight must not fill the log: repeats go to debug.
        if repeated { context.logger.debug(message) } else { context.logger.warning(message) }
    }
}

/// The port as the UBX configuration exchange uses it: writes through ``BlockingWork``, reads as
/// the source reads (cancellable waits on the component's clock).
private struct SerialReceiverLink: ReceiverLink {
    let port: SerialPortHandle
    let wakeup: Wakeup
    let source: SerialNMEASource

    func write(_ bytes: [UInt8]) async throws {
        let port = port
        let written = try await BlockingWork.run { () throws(SerialPortError) in try port.write(bytes, timeoutMilliseconds: 2000) }
        if written < bytes.count {
            throw SerialPortError(kind: .failed, operation: "write a UBX init message", detail: "\(written) of \(bytes.count) bytes written")
        }
    }

    func read(timeout: Duration) async throws -> [UInt8] {
        try await source.readChunk(port, wakeup: wakeup, timeout: timeout)
    }
}
