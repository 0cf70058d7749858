import GatewayCore
import NMEA
import PositionEncoding
import ReceiverStream
import StreamSessions
import SystemIO

/// Runs a program and turns its standard output into positions; its standard error goes to
/// the log at warning level. The program is restarted with backoff whenever it exits, and
/// stopped (SIGTERM, then SIGKILL after `kill_timeout`) when the source is cancelled.
public struct ExecPositionSource: PositionSource {
    let configuration: ExecSourceConfiguration
    let context: ComponentContext
    /// Without output for this long, the pending NMEA epoch is emitted.
    static let idleFlush: Duration = .seconds(1)
    /// A run at least this long was healthy: the next restart starts the backoff afresh.
    static let healthyRun: Duration = .seconds(10)
    /// Longest stderr line logged; the rest is cut off.
    static let maxLogLine = 1000

    public init(configuration: ExecSourceConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    public func run(output: SourceOutput) async throws {
        let wakeup = try Wakeup()
        let name = configuration.command.first ?? "?"
        var run = 0
        var nmeaTotals = NMEAStatistics()
        var noHealth: ReceiverHealth?
        var loop = Reconnecting(backoff: Backoff(initial: configuration.restartInitial, cap: configuration.restartMax), clock: context.clock)
        try await loop.run(state: &noHealth, health: \.self, output: output, session: { _ in
            run += 1
            let started = context.clock.monotonicNow()
            // A run this long was healthy: the next restart starts the backoff afresh.
            func ended() -> Reconnecting.SessionEnd { context.clock.monotonicNow() - started >= Self.healthyRun ? .healthy : .unhealthy }
            let child = try ChildProcess(argv: configuration.command, environment: configuration.environment, cwd: configuration.cwd)
            context.stats.count("exec.starts")
            context.logger.info("started \(name) (pid \(child.pid))")
            switch await pump(child, run: run, wakeup: wakeup, output: output, nmeaTotals: &nmeaTotals) {
            case .cancelled:
                let (exit, forced) = await child.terminate(grace: configuration.killTimeout)
                context.logger.info("stopped \(name): \(exit)\(forced ? " (SIGKILL after \(DurationText.format(configuration.killTimeout)))" : "")")
                throw CancellationError()
            case .stalled:
                let (exit, forced) = await child.terminate(grace: configuration.killTimeout)
                context.stats.count("exec.stalls")
                context.logger.warning("\(name) printed nothing for \(DurationText.format(configuration.stallTimeout ?? .zero)); stopped it (\(exit)\(forced ? ", SIGKILL" : ""))")
            case .outputClosed:
                // Stdout closed: the program is exiting. Give it kill_timeout to finish on its own
                // (cleanup, a clean exit status) before stopping it like a hung one.
                var waited = Duration.zero
                while child.exitStatus() == nil && waited < configuration.killTimeout && !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(50))
                    waited += .milliseconds(50)
                }
                let exit = await child.terminate(grace: configuration.killTimeout).exit
                context.stats.count("exec.exits")
                if case .exited(0) = exit { context.logger.info("\(name) \(exit)") } else { context.logger.warning("\(name) \(exit)") }
            }
            return ended()
        }, failed: { error in
            context.stats.count("exec.start_failures")
            context.logger.error("\(error)")
        }, waiting: { delay in
            context.logger.info("restarting \(name) in \(DurationText.format(delay))")
        })
    }

    private enum Ending { case outputClosed, stalled, cancelled }

    /// Reads the child's stdout and stderr until stdout closes, it stalls, or the task is cancelled.
    private func pump(_ child: ChildProcess, run: Int, wakeup: Wakeup, output: SourceOutput, nmeaTotals: inout NMEAStatistics) async -> Ending {
        var nmea: ReceiverStreamDecoder?
        if configuration.format == .nmea {
            nmea = ReceiverStreamDecoder(options: .live(source: context.id, device: configuration.device, requireChecksum: configuration.requireChecksum))
        }
        let base = nmeaTotals
        defer {
            if let s = nmea?.statistics {
                nmeaTotals = base.adding(s)
                nmeaTotals.publish(to: context.stats)
            }
        }
        var lines = LineFramer(maxLineLength: configuration.maxLineBytes)
        var errLines = LineFramer(maxLineLength: Self.maxLogLine)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var positions: [Position] = []
        var lineNumber = 0
        let runToken = RunToken.next()
        var stderrOpen = true
        let clock = context.clock
        var timers = QuietTimers(idleFlush: Self.idleFlush, stallTimeout: configuration.stallTimeout, now: clock.monotonicNow())

        func handleLine(_ line: UnsafeRawBufferPointer) {
            lineNumber += 1
            let slice = line.last == 13 ? UnsafeRawBufferPointer(rebasing: line.dropLast()) : line
            guard slice.contains(where: { $0 != 32 && $0 != 9 }) else { return }
            do {
                let value = try JSONValue.parse(slice)
                // Ids the program did not give: source, device (when several share the program)
                // and fix time; untimed fixes get a run token so they never repeat after a restart.
                var p = try PositionJSON.decode(value, source: context.id) { p in
                    let device = (configuration.device ?? p.device).map { "\($0)-" } ?? ""
                    return p.time.map { "\(context.id)-\(device)\($0.milliseconds)" } ?? "\(context.id)-\(device)n\(runToken)-\(lineNumber)"
                }
                // This component produced it, whatever the program wrote.
                p.source = context.id
                if let d = configuration.device { p.device = d }
                positions.append(p)
            } catch {
                context.stats.count("exec.bad_lines")
                let bad = context.stats.value("exec.bad_lines")
                // The first few are worth a look; after that the counter tells the story.
                if bad <= 5 { context.logger.warning("stdout line \(lineNumber) skipped: \(error)") }
            }
        }

        while true {
            let ready = await wakeup.wait(stderrOpen ? [child.stdout, child.stderr] : [child.stdout],
                                          timeout: timers.wait(at: clock.monotonicNow()), clock: clock)
            if Task.isCancelled { return .cancelled }
            let now = clock.monotonicNow()
            if ready.isEmpty {
                if timers.takeIdleFlush(at: now), var d = nmea {
                    d.flushIdle(into: &positions)
                    nmea = d
                    await output.emit(positions)
                    positions.removeAll(keepingCapacity: true)
                }
                if timers.isStalled(at: now) { return .stalled }
                continue
            }
            if stderrOpen && ready.contains(child.stderr) {
                let n = child.read(child.stderr, into: &buffer)
                if n == 0 {
                    stderrOpen = false
                    errLines.finish { logStderr($0) }
                } else {
                    buffer.withUnsafeBytes { errLines.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n]), line: { logStderr($0) }) }
                }
            }
            guard ready.contains(child.stdout) else { continue }
            let n = child.read(child.stdout, into: &buffer)
            if n == 0 {
                if var d = nmea {
                    d.flush(into: &positions)
                    nmea = d
                } else {
                    lines.finish { handleLine($0) }
                }
                errLines.finish { logStderr($0) }
                await output.emit(positions)
                return .outputClosed
            }
            timers.received(at: now)
            if var d = nmea {
                buffer.withUnsafeBytes { d.decode(UnsafeRawBufferPointer(rebasing: $0[0..<n]), into: &positions) }
                nmea = d
                base.adding(d.statistics).publish(to: context.stats)
            } else {
                buffer.withUnsafeBytes {
                    lines.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n]), line: { handleLine($0) }, overlong: {
                        context.stats.count("exec.long_lines")
                        if context.stats.value("exec.long_lines") <= 5 {
                            context.logger.warning("skipped a stdout line longer than \(configuration.maxLineBytes) bytes")
                        }
                    })
                }
            }
            if !positions.isEmpty {
                await output.emit(positions)
                positions.removeAll(keepingCapacity: true)
            }
        }
    }

    private func logStderr(_ line: UnsafeRawBufferPointer) {
        let slice = line.last == 13 ? UnsafeRawBufferPointer(rebasing: line.dropLast()) : line
        guard !slice.isEmpty else { return }
        context.stats.count("exec.stderr_lines")
        context.logger.warning("stderr: \(String(decoding: slice, as: UTF8.self))")
    }
}
