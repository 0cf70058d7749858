import GatewayCore
import SystemIO
#if canImport(Glibc)
import Glibc
import EnvironmentChecks
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
    public var rate = FileReplayPlugin.rate.defaultValue
    public var loop = FileReplayPlugin.loop.defaultValue
    public var device: String?
    public var requireChecksum = FileReplayPlugin.requireChecksum.defaultValue
    public var progress = FileReplayPlugin.progress.defaultValue

    /// The defaults, reading `path` in the format its extension implies.
    public init(path: String = "") {
        self.path = path
        format = Format(forPath: path)
    }
}

extension FileReplayConfiguration.Format {
    /// The format a file's extension implies: .jsonl/.json → jsonl, .gpx → gpx, anything else → nmea.
    public init(forPath path: String) {
        let lower = path.lowercased()
        self = lower.hasSuffix(".jsonl") || lower.hasSuffix(".json") ? .jsonl : lower.hasSuffix(".gpx") ? .gpx : .nmea
    }
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
            try await replay(output: output, idPrefix: prefix, pass: pass, pacer: &pacer)
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
            // Handed over, not copied: the pipeline may change the batch in place.
            let batch = positions
            positions = []
            await output.emit(batch)
            return
        } else {
            for p in positions {
                try await pacer.wait(for: p.time)
                await output.emit([p])
            }
        }
        positions.removeAll(keepingCapacity: true)
    }

    /// One pass over the file.
    private func replay(output: SourceOutput, idPrefix: String, pass: Int, pacer: inout Pacer) async throws {
        var reader = try PositionFileReader(configuration: configuration, context: context, idPrefix: idPrefix, pass: pass)
        defer { reader.close() }
        var progress = progress(total: reader.size)
        while var positions = try reader.next() {
            try Task.checkCancellation()
            try await deliver(&positions, output: output, pacer: &pacer)
            progress.update(reader.offset, positions: pacer.emitted)
        }
        progress.finish()
    }
}

/// Waits so positions come out at their own pace (scaled by the rate).
struct Pacer {
    let rate: FileReplayConfiguration.Rate
    let clock: any GatewayClock
    var origin: (data: Timestamp, at: MonotonicInstant)?
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
            origin = (time, clock.monotonicNow())
            return
        }
        let due = Double(time.milliseconds - o.data.milliseconds) / factor
        let elapsed = Double((clock.monotonicNow() - o.at).milliseconds)
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
    let started: MonotonicInstant
    private var lastLog: (milliseconds: Int64, positions: Int)

    /// How often the log line is written.
    static let logInterval: Int64 = 10_000

    init(enabled: Bool, rateIsMax: Bool, terminal: Bool, path: String, total: Int, logger: Logger, clock: any GatewayClock) {
        if !enabled { mode = .off } else if terminal { mode = rateIsMax && total > 1 << 20 ? .terminal : .off } else { mode = .log }
        self.path = path
        self.total = total
        self.logger = logger
        self.clock = clock
        started = clock.monotonicNow()
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
            let now = clock.monotonicNow()
            guard (now - started).milliseconds - lastDraw >= 250 else { return }
            lastDraw = (now - started).milliseconds
            let pct = total > 0 ? done * 100 / total : 0
            let secs = max(0.001, (now - started).secondsDouble)
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
