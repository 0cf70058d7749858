/// A duration in the units C APIs and counters take: the one place a `Duration` becomes a
/// number (poll and libuv timeouts, libnats' nanoseconds, latency sums, option texts).
extension Duration {
    /// Whole milliseconds (truncated).
    public var milliseconds: Int64 {
        let c = components
        return c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
    }

    /// Whole nanoseconds (truncated).
    public var nanoseconds: Int64 {
        let c = components
        return c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000
    }

    /// Seconds as a floating-point number.
    public var secondsDouble: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
