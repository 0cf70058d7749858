import GatewayCore
import Locking

/// What a delivering sink's writes to its queue do when the disk is full: every write of the
/// sink (the commit of what arrives, the delete of what was delivered, the in-flight mark, the move
/// to the dead letters) goes through here, so they all behave alike.
///
/// A full disk never fails the sink: the write is kept and retried, nothing leaves the queue that
/// was not written. Each kind of write is logged at error level at once and at most every 10 s
/// while it fails (``LogRateLimit``); the gauge `queue.disk_full` is 1 while any write fails and
/// the counter `queue.write_failures` counts the failed attempts.
public final class QueueWrites: Sendable {
    let context: ComponentContext
    /// The kinds of write failing now, and since when (ms on the context's clock).
    private let failing = Locked<[String: Int64]>([:])
    private let logLimit = Locked(LogRateLimit(intervalMilliseconds: 10_000))

    init(context: ComponentContext) {
        self.context = context
    }

    /// Notes a failed attempt of the write `kind`; logs `message` (the error and what is kept)
    /// unless it was logged within the last 10 s. Returns how long the write has been failing.
    @discardableResult
    public func failed(_ kind: String, message: @autoclosure () -> String) -> Duration {
        let now = context.clock.now().milliseconds
        let since = failing.withLock { f in
            if f[kind] == nil { f[kind] = now }
            return f[kind] ?? now
        }
        context.stats.count("queue.write_failures")
        context.stats.set("queue.disk_full", 1)
        if let suppressed = logLimit.withLock({ $0.allow(kind, now: now) }) {
            context.logger.error(message() + LogRateLimit.suffix(suppressed))
        }
        return .milliseconds(now - since)
    }

    /// Notes that the write `kind` went through; returns how long it had failed (nil: it had not).
    @discardableResult
    public func succeeded(_ kind: String) -> Duration? {
        let now = context.clock.now().milliseconds
        let (since, noneLeft): (Int64?, Bool) = failing.withLock { f in
            guard let since = f.removeValue(forKey: kind) else { return (nil, false) }
            return (since, f.isEmpty)
        }
        guard let since else { return nil }
        if noneLeft { context.stats.set("queue.disk_full", 0) }
        return .milliseconds(now - since)
    }

    /// Runs `body` until it goes through, waiting `interval` after each attempt that found the disk
    /// full; other errors are thrown, and `CancellationError` when cancelled while waiting (the
    /// write is then not done: what it would have removed stays queued and is sent again).
    public func perform(_ what: String, kind: String, interval: Duration, _ body: () async throws -> Void) async throws {
        while true {
            do {
                try await body()
                if let held = succeeded(kind) {
                    context.logger.warning("queue: \(what): done after \(DurationText.format(held)) of a full disk")
                }
                return
            } catch let e as OutboxError where e.isDiskFull {
                failed(kind, message: "\(e): cannot \(what); keeping it queued, retrying every \(DurationText.format(interval))")
                try await context.clock.sleep(for: interval)
            }
        }
    }

    /// One attempt of `body` for a loop that retries on its own: false when the disk is full (the
    /// work is kept for the next pass); other errors are thrown.
    public func attempt(_ what: String, kind: String, _ body: () throws -> Void) throws -> Bool {
        do {
            try body()
            succeeded(kind)
            return true
        } catch let e as OutboxError where e.isDiskFull {
            failed(kind, message: "\(e): cannot \(what); retrying")
            return false
        }
    }
}
