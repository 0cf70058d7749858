import Foundation
import Locking
import Testing

/// What a test that runs the binary against a NATS cluster saw, recorded as one issue when it
/// fails: each phase with its duration and what it found, then the consumer and the stream as the
/// cluster reports them, the tails of locgate's logs and the warnings of the nats-servers.
/// A phase that hung shows as the one that ran into the time limit; `Poll.until` returns at once
/// once the test is cancelled, so the phases after it take no time and fail.
final class RunReport: Sendable {
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private let state: Locked<(lines: [String], last: ContinuousClock.Instant, failed: Bool)>

    init() {
        started = clock.now
        state = Locked(([], started, false))
    }

    /// A phase ended: its duration since the previous one, and what it found. `ok: false` makes
    /// the report print (the `#expect` or `#require` beside it records the failure itself).
    func lap(_ what: String, ok: Bool = true) {
        let now = clock.now
        let cancelled = Task.isCancelled
        state.withLock { s in
            s.lines.append("\(Self.seconds(now - started)) (+\(Self.seconds(now - s.last)))\(ok ? "" : " FAILED")\(cancelled ? " [cancelled]" : ""): \(what)")
            s.last = now
            s.failed = s.failed || !ok
        }
    }

    var failed: Bool { state.withLock { $0.failed } }

    /// Records the report as an issue: the phases, then `details` (asked for on a task of its own,
    /// so a test cancelled by its time limit can still ask the cluster), then the logs.
    func record(details: @escaping @Sendable () async -> [String], logs: [String], serverLogs: [String],
                sourceLocation: SourceLocation = #_sourceLocation) async {
        var text = ["\(Task.isCancelled ? "cancelled (time limit)" : "failed") after \(Self.seconds(clock.now - started)); phases:"]
        text += state.withLock { $0.lines }.map { "  " + $0 }
        text += await Self.detached(limit: .seconds(20), details).map { "  " + $0 }
        // A run's log: what it said (the last 12 lines), then its last two statistics lines.
        for path in logs {
            text += Self.tail(path, lines: 12) { !$0.contains("pipeline.stats") }
            text += Self.tail(path, lines: 2) { $0.contains("pipeline.stats") }.dropFirst()
        }
        for path in serverLogs { text += Self.tail(path, lines: 6) { $0.contains("[WRN]") || $0.contains("[ERR]") || $0.contains("leader") } }
        Issue.record(Comment(rawValue: text.joined(separator: "\n")), sourceLocation: sourceLocation)
    }

    /// The last `lines` lines of a file that `keep` lets through, each cut to 240 characters.
    static func tail(_ path: String, lines: Int, keep: (Substring) -> Bool = { _ in true }) -> [String] {
        let name = (path as NSString).lastPathComponent
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return ["\(name): not there"] }
        let all = text.split(separator: "\n").filter(keep)
        let shown = all.suffix(lines).map { "    " + ($0.count > 240 ? $0.prefix(240) + "…" : $0) }
        return ["\(name): \(all.count) line(s)\(all.count > lines ? ", the last \(lines)" : "")"] + shown
    }

    /// `body` on a detached task, waited for up to `limit`: after the time limit the test's own
    /// tasks are cancelled, and the cluster client gives up at once in a cancelled task.
    static func detached(limit: Duration, _ body: @escaping @Sendable () async -> [String]) async -> [String] {
        let waiter = Locked<CheckedContinuation<[String], Never>?>(nil)
        let finish: @Sendable ([String]) -> Void = { result in
            waiter.withLock { w in defer { w = nil }; return w }?.resume(returning: result)
        }
        return await withCheckedContinuation { c in
            waiter.withLock { $0 = c }
            Task.detached { finish(await body()) }
            Task.detached {
                try? await Task.sleep(for: limit)
                finish(["(no answer from the cluster within \(limit))"])
            }
        }
    }

    static func seconds(_ d: Duration) -> String {
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        return String(format: "%.1f s", Double(ms) / 1000)
    }
}
