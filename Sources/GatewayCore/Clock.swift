import Foundation

/// Wall-clock time and sleeping, injectable so time-dependent behaviour is tested without waiting.
public protocol GatewayClock: Sendable {
    /// The current UTC instant.
    func now() -> Timestamp
    /// Suspends for `duration`; throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real clock.
public struct SystemClock: GatewayClock {
    public init() {}

    public func now() -> Timestamp {
        Timestamp(milliseconds: Int64((Date().timeIntervalSince1970 * 1000).rounded()))
    }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
