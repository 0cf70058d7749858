/// Decides whether a repeated fault is logged now: at most once per `interval` per key.
///
/// Faults that come from outside (an unknown device calling every 10 s, a flood of
/// connections) would otherwise fill the journal; counting them is the stats' job, and the log
/// line says how many were not logged since the last one.
public struct LogRateLimit: Sendable {
    public let interval: Int64
    private var last: [String: (at: Int64, suppressed: Int)] = [:]
    /// Keys kept at most (the keys come from input: IMEIs, addresses).
    private let capacity: Int

    /// `interval` in milliseconds of the times given to ``allow(_:now:)``.
    public init(intervalMilliseconds: Int64 = 60_000, capacity: Int = 10_000) {
        interval = intervalMilliseconds
        self.capacity = capacity
    }

    /// Nil when `key` was logged within the interval (the call is counted as suppressed);
    /// otherwise how many calls were suppressed since it was last logged.
    public mutating func allow(_ key: String, now: Int64) -> Int? {
        if let previous = last[key], now - previous.at < interval {
            last[key] = (previous.at, previous.suppressed + 1)
            return nil
        }
        if last.count >= capacity {
            // Forget the stale ones; a key seen again is logged again, which is the point.
            last = last.filter { now - $0.value.at < interval }
            if last.count >= capacity { last.removeAll(keepingCapacity: true) }
        }
        let suppressed = last[key]?.suppressed ?? 0
        last[key] = (now, 0)
        return suppressed
    }

    /// ` (N more since the last report)` when `suppressed` > 0, else empty.
    public static func suffix(_ suppressed: Int) -> String {
        suppressed > 0 ? " (\(suppressed) more since the last report)" : ""
    }
}
