import Dispatch
import Foundation
import Synchronization

/// Time for every component that waits, injectable so time-dependent behaviour is tested
/// without waiting (`ManualClock` in GatewayTesting).
///
/// Two timelines: wall time (`now()`, what positions, logs and duty-cycle windows are stamped
/// with; it may jump when the machine's clock is set) and monotonic time (`monotonicNow()`, what
/// intervals, backoffs, deadlines and idle times are measured on; it never jumps). Waits are on
/// the monotonic timeline: `sleep(until:)` for a task, `wake(at:_:)` for a wait that is not a
/// task's sleep (a signal's timed wait, a descriptor's poll).
///
/// Implementation requirements:
/// - `monotonicNow()` never decreases.
/// - `sleep(until:)` returns once `monotonicNow()` reached the deadline (at once for a deadline
///   already past) and throws `CancellationError` promptly when the task is cancelled.
/// - `wake(at:_:)` calls `action` once, on any thread, when the deadline is reached (not before),
///   unless the returned ``ClockTimer`` was cancelled first.
/// - `isReal` is true only for a clock whose monotonic time is the machine's: a wait with a
///   timeout of its own (`poll`) then measures the same time. Any other clock wakes such a wait
///   through `wake(at:_:)`.
public protocol GatewayClock: Sendable {
    /// The current UTC instant (wall time).
    func now() -> Timestamp
    /// The current instant on the monotonic timeline.
    func monotonicNow() -> MonotonicInstant
    /// Suspends until `deadline`; throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: MonotonicInstant) async throws
    /// Calls `action` once `deadline` is reached.
    @discardableResult
    func wake(at deadline: MonotonicInstant, _ action: @escaping @Sendable () -> Void) -> ClockTimer
    /// True when monotonic time is the machine's own (the system clock).
    var isReal: Bool { get }
}

// MARK: - Default implementations

extension GatewayClock {
    /// Suspends for `duration`; throws `CancellationError` when the task is cancelled.
    public func sleep(for duration: Duration) async throws {
        try await sleep(until: monotonicNow() + duration)
    }

    public var isReal: Bool { false }
}

extension GatewayClock where Self == SystemClock {
    /// The machine's clock: what every component gets unless a test hands it another.
    public static var system: SystemClock { SystemClock() }
}

/// An instant on a ``GatewayClock``'s monotonic timeline: time since the clock's origin.
public struct MonotonicInstant: Comparable, Hashable, Sendable {
    /// Time since the clock's origin (a clock's own choice: the process's start, a test's zero).
    public var sinceOrigin: Duration

    public init(sinceOrigin: Duration) { self.sinceOrigin = sinceOrigin }

    public static func < (a: MonotonicInstant, b: MonotonicInstant) -> Bool { a.sinceOrigin < b.sinceOrigin }
    public static func + (a: MonotonicInstant, d: Duration) -> MonotonicInstant { MonotonicInstant(sinceOrigin: a.sinceOrigin + d) }
    public static func - (a: MonotonicInstant, d: Duration) -> MonotonicInstant { MonotonicInstant(sinceOrigin: a.sinceOrigin - d) }
    public static func - (a: MonotonicInstant, b: MonotonicInstant) -> Duration { a.sinceOrigin - b.sinceOrigin }
}

/// A pending ``GatewayClock/wake(at:_:)``: cancelling it keeps its action from running.
public final class ClockTimer: Sendable {
    private let cancelled = Atomic<Bool>(false)
    private let onCancel: (@Sendable () -> Void)?

    /// `onCancel` lets a clock forget the timer at once.
    public init(onCancel: (@Sendable () -> Void)? = nil) { self.onCancel = onCancel }

    /// The action will not run (unless it already started).
    public func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        onCancel?()
    }

    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
}

/// The machine's clock: wall time from the system, monotonic time from `ContinuousClock`.
public struct SystemClock: GatewayClock {
    /// The monotonic timeline's origin: the first use in the process.
    private static let origin = ContinuousClock.now

    public init() {}

    public func now() -> Timestamp {
        Timestamp(milliseconds: Int64((Date().timeIntervalSince1970 * 1000).rounded()))
    }

    public func monotonicNow() -> MonotonicInstant {
        MonotonicInstant(sinceOrigin: ContinuousClock.now - SystemClock.origin)
    }

    public func sleep(until deadline: MonotonicInstant) async throws {
        try await Task.sleep(until: SystemClock.origin + deadline.sinceOrigin, clock: .continuous)
    }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }

    /// A Dispatch timer: no task and no thread wait for it.
    @discardableResult
    public func wake(at deadline: MonotonicInstant, _ action: @escaping @Sendable () -> Void) -> ClockTimer {
        let left = deadline - monotonicNow()
        let nanoseconds = max(0, left.components.seconds) * 1_000_000_000 + max(0, left.components.attoseconds / 1_000_000_000)
        let timer = ClockTimer()
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) {
            if !timer.isCancelled { action() }
        }
        return timer
    }

    public var isReal: Bool { true }
}
