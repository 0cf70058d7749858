import GatewayCore
import Locking
import RTCM
import SystemIO

/// Where the client hands each RTCM 3 frame (the serial source writes it to the receiver's port
/// between its reads).
public protocol RTCMFrameWriter: Sendable {
    /// Writes one whole, CRC-checked frame; throws when it cannot (the port is closed).
    func write(_ frame: [UInt8]) async throws
}

/// An NTRIP client: connects to a caster's mountpoint, checks the RTCM 3 frames of the stream
/// (CRC-24Q) and hands each whole to a writer; sends the receiver's position as GGA when the
/// mountpoint wants it; reconnects after failures with a growing, jittered delay.
///
/// ```
///   caster ──TCP──▶ response head ──▶ [chunked decoding] ──▶ RTCMStreamFramer ──▶ writer
///      ▲                                                       (CRC-24Q, junk dropped)
///      └──── GGA every gga_interval, from lastFix(), once there is a fix
/// ```
///
/// Why a hand-written client on SystemIO's sockets and not libcurl (which the HTTP sink uses):
/// - NTRIP 1's `ICY 200 OK` is not an HTTP status line. curl maps it to 200 only through
///   `CURLOPT_HTTP200ALIASES` (`CURLOPT_HTTP09_ALLOWED` is for responses with no status line at
///   all), and then reads header lines until a blank line — which RTKLIB's caster and others
///   never send: the RTCM bytes right after `ICY 200 OK\r\n` would be parsed as headers.
/// - GGA goes upstream on the same connection while the body streams down; with curl that
///   needs `CURLOPT_CONNECT_ONLY` and `curl_easy_send`/`curl_easy_recv`, i.e. writing the HTTP
///   exchange by hand anyway, plus curl's own chunked decoder, which cannot be used then.
/// - Stall detection and GGA timing run on the injected clock, which a curl transfer's
///   callbacks would have to be bent to follow.
/// What is given up: TLS (`https` casters). Casters on port 2101 are plain TCP; a TLS caster
/// can be reached through `stunnel` or `socat OPENSSL:` on loopback.
///
/// Cancel the task that runs ``run()`` to stop it; the connection is closed at once.
public final class NTRIPClient: Sendable {
    public let configuration: NTRIPConfiguration
    private let writer: any RTCMFrameWriter
    private let lastFix: @Sendable () -> Position?
    private let clock: any GatewayClock
    private let logger: Logger
    private let stats: ComponentStats?
    private let tick: Duration
    private let random: @Sendable () -> Double
    private let state = Locked(NTRIPStatistics())

    /// - Parameters:
    ///   - lastFix: the receiver's last position (nil before its first fix), for GGA.
    ///   - tick: the longest real wait between two looks at the clock (stall, GGA due); tests
    ///     that drive a ``GatewayClock`` by hand make it short.
    ///   - random: numbers in 0…1 for the backoff's jitter.
    public init(configuration: NTRIPConfiguration, writer: any RTCMFrameWriter, lastFix: @escaping @Sendable () -> Position?,
                clock: any GatewayClock, logger: Logger, stats: ComponentStats? = nil, tick: Duration = .seconds(1),
                random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }) {
        self.configuration = configuration
        self.writer = writer
        self.lastFix = lastFix
        self.clock = clock
        self.logger = logger
        self.stats = stats
        self.tick = tick
        self.random = random
    }

    /// What the client did so far.
    public var statistics: NTRIPStatistics { state.withLock { $0 } }

    /// How a connection ended, and what to say about it.
    enum Ending: Error {
        case failed(String)
        case unauthorized
        case stalled
        /// The caster closed a stream that delivered corrections.
        case closed
    }

    /// Connects, streams and reconnects until the task is cancelled.
    public func run() async throws {
        let wakeup = try Wakeup()
        var policy = NTRIPRetryPolicy(configuration: configuration)
        var sendsGGA: Bool? = configuration.gga == .always ? true : configuration.gga == .never ? false : nil
        var unauthorizedReported = false
        while !Task.isCancelled {
            // auto: the sourcetable decides; unread (caster down), GGA is sent this time and the
            // table asked for again before the next attempt.
            var ggaThisTime = sendsGGA ?? true
            if sendsGGA == nil, let wanted = await lookUpNMEAFlag(wakeup: wakeup) {
                sendsGGA = wanted
                ggaThisTime = wanted
            }
            var delivered: Duration = .zero
            let ending: Ending
            do {
                try await session(wakeup: wakeup, sendsGGA: ggaThisTime, delivered: &delivered)
                ending = .closed
            } catch let e as Ending {
                ending = e
            } catch is CancellationError {
                break
            } catch {
                ending = .failed("\(error)")
            }
            state.withLock { $0.connected = false }
            if Task.isCancelled { break }
            let retry: NTRIPRetryPolicy.Ending
            switch ending {
            case .unauthorized: retry = .unauthorized
            case .failed: retry = delivered > .zero ? .ended(lasted: delivered) : .failed
            case .stalled, .closed: retry = .ended(lasted: delivered)
            }
            let delay = policy.delay(after: retry, random: random())
            state.withLock { $0.lastDelay = delay }
            let next = DurationText.format(delay)
            switch ending {
            case .unauthorized:
                // Reported once: a wrong password stays wrong until someone changes it.
                if !unauthorizedReported {
                    logger.error("ntrip \(configuration.display): 401 Unauthorized — check user and password; retrying every \(DurationText.format(configuration.unauthorizedRetry)) (reported once)")
                    unauthorizedReported = true
                } else {
                    logger.debug("ntrip \(configuration.display): 401 again; next attempt in \(next)")
                }
            case .stalled:
                logger.warning("ntrip \(configuration.display): no bytes for \(DurationText.format(configuration.stallTimeout)); reconnecting in \(next)")
            case .closed:
                logger.warning("ntrip \(configuration.display): the caster closed the stream after \(DurationText.format(delivered)); reconnecting in \(next)")
            case .failed(let why):
                logger.warning("ntrip \(configuration.display): \(why); attempt \(policy.failures) in a row failed, next in \(next)")
            }
            if case .unauthorized = ending {} else if delivered > .zero { unauthorizedReported = false }
            do { try await clock.sleep(for: delay) } catch { break }
        }
    }

    /// Reads the sourcetable for the mountpoint's `nmea` flag (auto GGA): true when it is not in
    /// the table (a virtual reference station needs GGA), nil when the table could not be read.
    private func lookUpNMEAFlag(wakeup: Wakeup) async -> Bool? {
        do {
            let table = try await NTRIPSourcetableRequest.fetch(configuration, wakeup: wakeup, timeout: configuration.connectTimeout + configuration.stallTimeout)
            if let stream = table.stream(configuration.mountpoint) {
                logger.info("ntrip \(configuration.display): sourcetable says nmea=\(stream.wantsNMEA ? 1 : 0): \(stream.wantsNMEA ? "sending" : "not sending") GGA")
                return stream.wantsNMEA
            }
            logger.info("ntrip \(configuration.display): the mountpoint is not in the sourcetable; sending GGA (a virtual reference station needs it)")
            return true
        } catch is CancellationError {
            return nil
        } catch {
            logger.info("ntrip \(configuration.display): sourcetable not read (\(error)); sending GGA until it is")
            return nil
        }
    }

    /// One connection: returns when the caster closes a delivering stream; throws ``Ending``.
    private func session(wakeup: Wakeup, sendsGGA: Bool, delivered: inout Duration) async throws {
        let c = configuration
        state.withLock { $0.attempts += 1 }
        stats?.count("ntrip_attempts")
        let socket: Socket
        do {
            socket = try await Socket.connect(host: c.host, port: c.port, timeout: c.connectTimeout, wakeup: wakeup)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw Ending.failed("\(error)")
        }
        try await send(NTRIPRequest.bytes(c, mountpoint: c.mountpoint), on: socket, wakeup: wakeup)

        // The head, within the stall timeout.
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var reader = NTRIPResponseHead.Reader()
        let headDeadline = clock.now().milliseconds + c.stallTimeout.milliseconds
        var head: NTRIPResponseHead?
        var bodyStart = 0
        while head == nil {
            let left = headDeadline - clock.now().milliseconds
            guard left > 0 else { throw Ending.failed("no answer from the caster within \(DurationText.format(c.stallTimeout))") }
            var atEnd = false
            var count = 0
            switch try await socket.read(into: &buffer, timeout: .milliseconds(min(left, tick.milliseconds)), wakeup: wakeup) {
            case .bytes(let n): count = n
            case .nothing: continue
            case .end: atEnd = true
            }
            do {
                if let (h, length) = try reader.feed(buffer[0..<count], atEnd: atEnd) { head = h; bodyStart = length }
            } catch {
                throw Ending.failed("not an NTRIP answer: \(error)")
            }
            if atEnd && head == nil {
                throw Ending.failed(reader.received.isEmpty ? "the caster closed the connection without an answer" : "the caster closed the connection during its answer")
            }
        }
        guard let head else { return }
        switch head.kind {
        case .data: break
        case .unauthorized:
            state.withLock { $0.unauthorized += 1 }
            stats?.count("ntrip_unauthorized")
            throw Ending.unauthorized
        case .sourcetable:
            throw Ending.failed("mountpoint \"\(c.mountpoint)\" not on the caster (it answered with its sourcetable)")
        case .refused(let code, let reason):
            throw Ending.failed("the caster answered \(code) \(reason)\(code == 404 ? " (no such mountpoint)" : "")")
        }

        let connectedAt = clock.now()
        state.withLock { $0.connected = true; $0.connections += 1 }
        stats?.count("ntrip_connections")
        logger.info("ntrip \(c.display): connected (\(head.statusLine)\(head.chunked ? ", chunked" : ""))")
        var framer = RTCMStreamFramer()
        var chunked: HTTPChunkedDecoder? = head.chunked ? HTTPChunkedDecoder() : nil
        var timer = NTRIPSessionTimer(start: connectedAt, stallTimeout: c.stallTimeout, ggaInterval: c.ggaInterval, sendsGGA: sendsGGA)
        var frames: [[UInt8]] = []
        var pending = Array(reader.received[bodyStart...])
        defer { delivered = .milliseconds(clock.now().milliseconds - connectedAt.milliseconds) }

        while true {
            if !pending.isEmpty {
                timer.bytesArrived(at: clock.now())
                let before = framer.counters
                do {
                    try pending.withUnsafeBytes { (raw) throws(HTTPChunkedDecoder.Failure) in
                        if chunked != nil {
                            try chunked?.feed(raw) { body in framer.feed(body) { frames.append(Array($0)) } }
                        } else {
                            framer.feed(raw) { frames.append(Array($0)) }
                        }
                    }
                } catch {
                    throw Ending.failed("bad chunked encoding from the caster (\(error))")
                }
                pending.removeAll(keepingCapacity: true)
                try await deliver(&frames, counters: framer.counters, before: before)
                if chunked?.isFinished == true { return }
            }
            let now = clock.now()
            state.withLock { $0.lastTick = now }
            let fix = sendsGGA ? lastFix() : nil
            switch timer.next(now: now, haveFix: fix.flatMap { GGASentence.sentence(for: $0, now: now) } != nil) {
            case .stalled:
                state.withLock { $0.stalls += 1 }
                stats?.count("ntrip_stalls")
                throw Ending.stalled
            case .sendGGA:
                if let fix, let gga = GGASentence.sentence(for: fix, now: now) {
                    try await send(Array(gga.utf8), on: socket, wakeup: wakeup)
                    timer.ggaSent(at: now)
                    state.withLock { $0.ggaSent += 1 }
                    stats?.count("ntrip_gga_sent")
                }
            case .wait(let until):
                let left = max(1, min(until.milliseconds - now.milliseconds, tick.milliseconds))
                switch try await socket.read(into: &buffer, timeout: .milliseconds(left), wakeup: wakeup) {
                case .bytes(let n): pending += buffer[0..<n]
                case .nothing: break
                case .end: return
                }
            }
        }
    }

    /// Hands the frames to the writer, in order, and counts them.
    private func deliver(_ frames: inout [[UInt8]], counters: RTCMStreamFramer.Counters, before: RTCMStreamFramer.Counters) async throws {
        var failures = 0
        for frame in frames {
            do {
                try await writer.write(frame)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                failures += 1
            }
        }
        let now = clock.now()
        let types = frames.map { f in f.withUnsafeBytes { RTCMFrame.messageType($0) } }
        state.withLock { s in
            s.bytes += counters.bytes - before.bytes
            s.frames += frames.count
            s.crcFailures += counters.badCRC - before.badCRC
            s.junkBytes += counters.junkBytes - before.junkBytes
            s.writeFailures += failures
            for t in types { s.framesByType[t, default: 0] += 1 }
            if !frames.isEmpty { s.lastFrameAt = now }
        }
        if let stats {
            stats.count("ntrip_bytes", by: counters.bytes - before.bytes)
            stats.count("ntrip_frames", by: frames.count)
            if counters.badCRC > before.badCRC { stats.count("ntrip_crc_failures", by: counters.badCRC - before.badCRC) }
            if failures > 0 { stats.count("ntrip_write_failures", by: failures) }
            for t in types { stats.count("ntrip_frames_\(t)") }
        }
        frames.removeAll(keepingCapacity: true)
    }

    private func send(_ bytes: [UInt8], on socket: Socket, wakeup: Wakeup) async throws {
        do {
            try await socket.sendAll(bytes, timeout: configuration.connectTimeout, wakeup: wakeup)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw Ending.failed("\(error)")
        }
    }
}
