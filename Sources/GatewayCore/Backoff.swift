/// Capped exponential backoff with jitter, for reconnecting sources and retrying sinks.
public struct Backoff: Sendable {
    public var initial: Duration
    public var cap: Duration
    public var multiplier: Double
    /// Fraction of each delay that is randomised (0 = none), so many clients do not retry in step.
    public var jitter: Double
    private var current: Duration?

    public init(initial: Duration = .milliseconds(200), cap: Duration = .seconds(5), multiplier: Double = 2, jitter: Double = 0.2) {
        self.initial = initial
        self.cap = cap
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// The delay before the next attempt; each call grows it up to the cap.
    public mutating func next() -> Duration {
        let base: Duration
        if let c = current {
            let grown = c.secondsDouble * multiplier
            base = grown >= cap.secondsDouble ? cap : .milliseconds(Int64(grown * 1000))
        } else {
            base = min(initial, cap)
        }
        current = base
        guard jitter > 0 else { return base }
        let ms = Double(base.milliseconds)
        let factor = 1 - jitter + Double.random(in: 0...(2 * jitter))
        return .milliseconds(Int64(max(1, min(ms * factor, Double(cap.milliseconds)))))
    }

    /// Back to the initial delay (after a success).
    public mutating func reset() { current = nil }
}
