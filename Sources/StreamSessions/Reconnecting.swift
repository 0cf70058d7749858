import GatewayCore

/// The loop every source that reads its input in sessions shares (`tcp`, `exec`, `gpsd`,
/// `serial`): open a session (connect, start a program, open a port) and read it until it ends,
/// stalls or fails; then wait a capped exponential backoff and open the next. A session that
/// delivered input starts the backoff afresh; receiver health keeps its timers (and its `no_data`
/// events) running while the source waits; cancellation ends the loop at once.
///
/// The source keeps what is its own: what a session is, what it counts and logs when one fails
/// (`failed`), and the log line before a wait (`waiting`).
public struct Reconnecting {
    /// How a session ended.
    public enum SessionEnd: Sendable, Equatable {
        /// It delivered input: the next failure starts the backoff from the beginning.
        case healthy
        /// It delivered nothing (a refused connection, a port that went away at once).
        case unhealthy
        /// Open the next one at once, without a backoff (a duty-cycle window ended on purpose).
        case reopen
    }

    public var backoff: Backoff
    private let clock: any GatewayClock

    public init(backoff: Backoff, clock: any GatewayClock) {
        self.backoff = backoff
        self.clock = clock
    }

    /// Runs sessions until the task is cancelled (then throws `CancellationError`, as `session`
    /// does). Each session borrows `state`, what outlives sessions (receiver health at
    /// `health`, duty-cycle windows); the waits between them keep its health timers running. A
    /// session that throws anything else counts as unhealthy and goes to `failed`; `waiting`
    /// hears each backoff delay before it is waited out.
    public mutating func run<State>(state: inout State, health: WritableKeyPath<State, ReceiverHealth?>, output: SourceOutput,
                                    session: (inout State) async throws -> SessionEnd,
                                    failed: (any Error) -> Void = { _ in },
                                    waiting: (Duration) -> Void) async throws {
        while true {
            try Task.checkCancellation()
            let end: SessionEnd
            do {
                end = try await session(&state)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                if Task.isCancelled { throw CancellationError() }
                failed(error)
                end = .unhealthy
            }
            switch end {
            case .reopen: continue
            case .healthy: backoff.reset()
            case .unhealthy: break
            }
            let delay = backoff.next()
            waiting(delay)
            try await Reconnecting.wait(delay, health: &state[keyPath: health], clock: clock, output: output)
        }
    }

    /// Waits `delay` on `clock`; with receiver health, in short steps that emit the events that
    /// come due meanwhile (a source waiting to reconnect still reports `no_data`).
    public static func wait(_ delay: Duration, health: inout ReceiverHealth?, clock: any GatewayClock, output: SourceOutput) async throws {
        guard var h = health else { return try await clock.sleep(for: delay) }
        defer { health = h }
        try await h.sleep(for: delay, clock: clock, output: output)
    }
}
