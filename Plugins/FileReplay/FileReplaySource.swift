import GatewayCore
import Preflight
import NMEA
#if canImport(Glibc)
import Glibc
#endif

/// Configuration of the `file` source.
public struct FileReplayConfiguration: Sendable {
    public enum Format: String, Sendable, CaseIterable { case nmea, jsonl, gpx }
    public enum Rate: Sendable, Equatable {
        /// As fast as possible.
        case max
        /// Paced by the positions' times, multiplied (1 = real time, 10 = ten times faster).
        case paced(Double)
    }
    public var path = ""
    public var format: Format = .nmea
    public var rate: Rate = .max
    public var loop = false
    public var device: String?
    public var requireChecksum = true
    public var progress = true
}

/// Replays a receiver log (NMEA), our own JSON Lines output, or a GPX track.
public struct FileReplaySource: PositionSource {
    let configuration: FileReplayConfiguration
    let context: ComponentContext
    /// Whether stderr is a terminal (progress is drawn there) or not (progress is logged).
    let terminal: Bool

    public init(configuration: FileReplayConfiguration, context: ComponentContext) {
        self.init(configuration: configuration, context: context, terminal: isatty(2) == 1)
    }

    init(configuration: FileReplayConfiguration, context: ComponentContext, terminal: Bool) {
        self.configuration = configuration
        self.context = context
        self.terminal = terminal
    }

    func progress(total: Int) -> Progress {
        Progress(enabled: configuration.progress, rateIsMax: configuration.rate == .max, terminal: terminal,
                 path: configuration.path, total: total, logger: context.logger, clock: context.clock)
    }

    public func run(output: SourceOutput) async throws {
        var pass = 0
        var warnedEmpty = false
        repeat {
            try Task.checkCancellation()
            // Ids stay deterministic per pass: a restarted replay reproduces them, a loop does not repeat them.
            let prefix = pass == 0 ? "\(context.id)-" : "\(context.id)-\(pass)-"
            var pacer = Pacer(rate: configuration.rate, clock: context.clock)
            switch configuration.format {
            case .nmea: try await replayNMEA(output: output, idPrefix: prefix, pacer: &pacer)
            case .jsonl: try await replayJSONL(output: output, idPrefix: prefix, pass: pass, pacer: &pacer)
            case .gpx: try await replayGPX(output: output, idPrefix: prefix, pacer: &pacer)
            }
            pass += 1
            if configuration.loop {
                context.logger.debug("end of \(configuration.path); looping (pass \(pass + 1))")
                if pacer.emitted == 0 {
                    // Nothing to replay: a loop must not spin on an empty (or all-bad) file.
                    if !warnedEmpty { context.logger.warning("\(configuration.path) has no positions; looping over it once a second") }
                    warnedEmpty = true
                    try await context.clock.sleep(for: .seconds(1))
                } else if let gap = pacer.typicalGap {
                    // The last epoch and the first are one epoch apart, not simultaneous: a paced
                    // loop of a one-epoch file would otherwise emit as fast as it can.
                    try await context.clock.sleep(for: gap)
                }
            }
        } while configuration.loop
    }

    /// Sends positions, pacing them by their times when the rate is not `max`.
    private func deliver(_ positions: inout [Position], output: SourceOutput, pacer: inout Pacer) async throws {
        guard !positions.isEmpty else { return }
        pacer.emitted += positions.count
        if case .max = configuration.rate {
            await output.emit(positions)
        } else {
            for p in positions {
                try await pacer.wait(for: p.time)
                await output.emit([p])
            }
        }
        positions.removeAll(keepingCapacity: true)
    }

    private func replayNMEA(output: SourceOutput, idPrefix: String, pacer: inout Pacer) async throws {
        var options = NMEAOptions()
        options.requireChecksum = configuration.requireChecksum
        options.source = context.id
        options.device = configuration.device
        options.idPrefix = idPrefix
        var decoder = NMEADecoder(options: options)
        var positions: [Position] = []
        var file = try ChunkedFile(path: configuration.path)
        defer { file.close() }
        var progress = progress(total: file.size)
        while let chunk = try file.read() {
            try Task.checkCancellation()
            chunk.withUnsafeBytes { decoder.decode($0, into: &positions) }
            try await deliver(&positions, output: output, pacer: &pacer)
            progress.update(file.offset, positions: pacer.emitted)
            decoder.statistics.publish(to: context.stats)
        }
        decoder.flush(into: &positions)
        try await deliver(&positions, output: output, pacer: &pacer)
        progress.finish()
        decoder.statistics.publish(to: context.stats)
        context.logger.info("\(configuration.path): \(decoder.statistics)")
    }

    private func replayJSONL(output: SourceOutput, idPrefix: String, pass: Int, pacer: inout Pacer) async throws {
        var file = try ChunkedFile(path: configuration.path)
        defer { file.close() }
        var progress = progress(total: file.size)
        // An over-long line cannot be a position: the framer skips it to its newline.
        let maxLine = 1 << 20
        var lines = LineFramer(maxLineLength: maxLine)
        var positions: [Position] = []
        var lineNumber = 0
        var bad = 0
        func handle(_ line: UnsafeRawBufferPointer) {
            lineNumber += 1
            let slice = line.last == 13 ? UnsafeRawBufferPointer(rebasing: line.dropLast()) : line
            guard slice.contains(where: { $0 != 32 && $0 != 9 }) else { return }
            do {
                let value = try JSONValue.parse(slice)
                var p = try PositionJSON.decode(value, source: context.id) { _ in "\(idPrefix)l\(lineNumber)" }
                // Ids written in the file repeat on every pass of a loop; the pass number keeps them unique.
                if pass > 0 && value["id"] != nil { p.id += "-\(pass)" }
                if let d = configuration.device { p.device = d }
                positions.append(p)
            } catch {
                bad += 1
                context.stats.count("jsonl.bad_lines")
                if bad <= 5 {
                    // One line is parsed at a time: the parser's own "line 1" would number it twice.
                    let reason = (error as? JSONParseError).map { "column \($0.column): \($0.message)" } ?? "\(error)"
                    context.logger.warning("\(configuration.path):\(lineNumber): skipped: \(LogText.escaped(reason))")
                }
            }
        }
        while let chunk = try file.read() {
            try Task.checkCancellation()
            chunk.withUnsafeBytes {
                lines.feed($0, line: { handle($0) }, overlong: {
                    lineNumber += 1
                    bad += 1
                    context.stats.count("jsonl.bad_lines")
                    context.logger.warning("\(configuration.path):\(lineNumber): skipped a line longer than \(maxLine) bytes")
                })
            }
            try await deliver(&positions, output: output, pacer: &pacer)
            progress.update(file.offset, positions: pacer.emitted)
        }
        lines.finish { handle($0) }
        try await deliver(&positions, output: output, pacer: &pacer)
        progress.finish()
        context.logger.info("\(configuration.path): \(lineNumber) lines, \(bad) skipped")
    }

    private func replayGPX(output: SourceOutput, idPrefix: String, pacer: inout Pacer) async throws {
        var file = try ChunkedFile(path: configuration.path)
        defer { file.close() }
        var bytes: [UInt8] = []
        while let chunk = try file.read() { bytes.append(contentsOf: chunk) }
        let (points, skipped) = GPXReader.read(bytes)
        if skipped > 0 {
            context.stats.count("gpx.bad_points", by: skipped)
            context.logger.warning("\(configuration.path): skipped \(skipped) point(s) without valid lat/lon")
        }
        var positions: [Position] = []
        positions.reserveCapacity(min(points.count, 4096))
        for (i, pt) in points.enumerated() {
            if i % 4096 == 0 { try Task.checkCancellation() }
            var p = GPXReader.position(pt)
            p.source = context.id
            p.device = configuration.device
            p.id = "\(idPrefix)\(i + 1)"
            positions.append(p)
            if positions.count >= 4096 { try await deliver(&positions, output: output, pacer: &pacer) }
        }
        try await deliver(&positions, output: output, pacer: &pacer)
        context.logger.info("\(configuration.path): \(points.count) points")
    }
}

/// Waits so positions come out at their own pace (scaled by the rate).
struct Pacer {
    let rate: FileReplayConfiguration.Rate
    let clock: any GatewayClock
    var origin: (data: Timestamp, wall: Timestamp)?
    /// Positions emitted in this pass.
    var emitted = 0
    private var span: (first: Timestamp, last: Timestamp, count: Int)?

    /// The mean interval between positions of this pass, scaled by the rate (1 s for a pass with
    /// one timed position); nil when not paced.
    var typicalGap: Duration? {
        guard case .paced(let factor) = rate else { return nil }
        var ms = 1000.0
        if let s = span, s.count > 1 { ms = Double(s.last.milliseconds - s.first.milliseconds) / Double(s.count - 1) }
        return .milliseconds(Int64(max(1, min(ms, 3_600_000) / factor)))
    }

    init(rate: FileReplayConfiguration.Rate, clock: any GatewayClock) {
        self.rate = rate
        self.clock = clock
    }

    mutating func wait(for time: Timestamp?) async throws {
        guard case .paced(let factor) = rate, let time else { return }
        if let s = span, time >= s.last { span = (s.first, time, s.count + 1) } else if span == nil { span = (time, time, 1) }
        guard let o = origin, time >= o.data, time.milliseconds - o.data.milliseconds < 3_600_000 else {
            // First position, a time going backwards or a gap over an hour: restart the pacing there.
            origin = (time, clock.now())
            return
        }
        let due = Double(time.milliseconds - o.data.milliseconds) / factor
        let elapsed = Double(clock.now().milliseconds - o.wall.milliseconds)
        if due > elapsed { try await clock.sleep(for: .milliseconds(Int64(due - elapsed))) }
    }
}

/// A file read in 256 KiB chunks with POSIX calls.
struct ChunkedFile {
    let path: String
    private var fd: Int32
    private(set) var size: Int
    private(set) var offset = 0
    private var buffer = [UInt8](repeating: 0, count: 256 * 1024)

    init(path: String) throws {
        self.path = path
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileReplayError(path: FileCheck.absolute(path), message: "cannot open for reading: \(FileCheck.reason(errno))") }
        var st = stat()
        size = fstat(fd, &st) == 0 ? Int(st.st_size) : 0
        if (st.st_mode & S_IFMT) == S_IFDIR {
            close()
            throw FileReplayError(path: FileCheck.absolute(path), message: "cannot replay: \(FileCheck.reason(EISDIR))")
        }
    }

    /// The next chunk, or nil at the end of the file.
    mutating func read() throws -> ArraySlice<UInt8>? {
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileReplayError(path: path, message: "read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { return nil }
            offset += n
            return buffer[0..<n]
        }
    }

    mutating func close() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }
}

/// Progress of a long replay. On a terminal (at `rate: max`), a line redrawn in place; without
/// one (a service, a CI log, a pipe), an info log line every 10 s with the bytes read, the share
/// of the file and the positions per second since the last line.
struct Progress {
    enum Mode { case off, terminal, log }
    let mode: Mode
    let path: String
    let total: Int
    let logger: Logger
    let clock: any GatewayClock
    var lastDraw: Int64 = 0
    let started = SystemClock().now()
    private var lastLog: (milliseconds: Int64, positions: Int)

    /// How often the log line is written.
    static let logInterval: Int64 = 10_000

    init(enabled: Bool, rateIsMax: Bool, terminal: Bool, path: String, total: Int, logger: Logger, clock: any GatewayClock) {
        if !enabled { mode = .off } else if terminal { mode = rateIsMax && total > 1 << 20 ? .terminal : .off } else { mode = .log }
        self.path = path
        self.total = total
        self.logger = logger
        self.clock = clock
        lastLog = (clock.now().milliseconds, 0)
    }

    /// After each chunk: `done` bytes read, `positions` emitted so far.
    mutating func update(_ done: Int, positions: Int) {
        switch mode {
        case .off: return
        case .log:
            let now = clock.now().milliseconds
            guard now - lastLog.milliseconds >= Progress.logInterval else { return }
            let rate = Double(positions - lastLog.positions) * 1000 / Double(now - lastLog.milliseconds)
            lastLog = (now, positions)
            logger.info(Progress.line(path: path, done: done, total: total, positionsPerSecond: rate))
        case .terminal:
            let now = SystemClock().now().milliseconds
            guard now - lastDraw >= 250 else { return }
            lastDraw = now
            let pct = total > 0 ? done * 100 / total : 0
            let secs = max(0.001, Double(now - started.milliseconds) / 1000)
            let mbps = Double(done) / 1_048_576 / secs
            let line = "\r\(path): \(pct)% \(done >> 20)/\(total >> 20) MiB \(Int(mbps)) MiB/s"
            _ = line.withCString { write(2, $0, strlen($0)) }
        }
    }

    /// `drive.nmea: 42% (120.3 MiB of 286.0 MiB), 85123 positions/s`.
    static func line(path: String, done: Int, total: Int, positionsPerSecond: Double) -> String {
        let pct = total > 0 ? done * 100 / total : 100
        return "\(path): \(pct)% (\(FileCheck.formatBytes(UInt64(done))) of \(FileCheck.formatBytes(UInt64(total)))), \(Int(positionsPerSecond.rounded())) positions/s"
    }

    func finish() {
        guard mode == .terminal else { return }
        _ = "\r\u{1B}[K".withCString { write(2, $0, strlen($0)) }
    }
}

public struct FileReplayError: Error, CustomStringConvertible {
    public var path: String
    public var message: String
    public var description: String { "\(path): \(message)" }
}
