import GatewayCore

/// A log handler that formats every message and drops it: the message texts, built from the
/// hostile input, are part of what is fuzzed, but nothing reaches the terminal.
public struct DiscardingLogHandler: LogHandler {
    public init() {}
    public var minimumLevel: LogLevel { .trace }
    public func log(level: LogLevel, label: String, message: String) {
        // Walk the whole text, as a real handler would.
        _ = message.utf8.count
    }
}

/// The clock of every fuzz target: a fixed instant, so an input replays the same way. Time never
/// moves, and every wait ends at once (nothing under fuzzing may wait on a clock that stands).
public struct FixedClock: GatewayClock {
    /// 2025-06-15T12:00:00Z.
    public static let instant = Timestamp(milliseconds: 1_749_988_800_000)

    public init() {}
    public func now() -> Timestamp { Self.instant }
    public func monotonicNow() -> MonotonicInstant { MonotonicInstant(sinceOrigin: .zero) }
    public func sleep(until deadline: MonotonicInstant) async throws { try Task.checkCancellation() }
    @discardableResult
    public func wake(at deadline: MonotonicInstant, _ action: @escaping @Sendable () -> Void) -> ClockTimer {
        action()
        return ClockTimer()
    }
}

extension ComponentContext {
    /// A context for a component under fuzzing: discarding logger, fresh stats, fixed clock.
    public static func fuzz(id: String, kind: ComponentKind) -> ComponentContext {
        ComponentContext(id: id, kind: kind, logger: Logger(label: "\(kind.section).\(id)", handler: DiscardingLogHandler()),
                         stats: ComponentStats(id: id), clock: FixedClock())
    }
}
