/// How long the client waits before connecting again, by how the last connection ended.
///
/// - A failure (refused, reset, timed out, stalled, closed early): ``NTRIPConfiguration/backoffInitial``
///   (at least 10 s), doubled after each failure in a row up to ``NTRIPConfiguration/backoffCap``,
///   each delay jittered by ±20 % so a fleet that lost its caster does not return in step.
/// - 401: ``NTRIPConfiguration/unauthorizedRetry`` (10 minutes by default), jittered: a wrong
///   password does not heal in seconds, and public casters ban clients that retry fast.
/// - A connection that delivered corrections for ``NTRIPConfiguration/stableAfter`` resets the
///   backoff: the next failure waits the initial delay again.
public struct NTRIPRetryPolicy: Sendable {
    /// How a connection ended.
    public enum Ending: Sendable, Equatable {
        case failed
        case unauthorized
        /// It delivered corrections for `lasted` before it ended.
        case ended(lasted: Duration)
    }

    public let configuration: NTRIPConfiguration
    public static let jitter = 0.2
    private var failuresInARow = 0

    public init(configuration: NTRIPConfiguration) {
        self.configuration = configuration
    }

    /// The delay before the next attempt; `random` is a number in 0…1 (the jitter).
    public mutating func delay(after ending: Ending, random: Double) -> Duration {
        let c = configuration
        let base: Double
        switch ending {
        case .unauthorized:
            failuresInARow += 1
            return jittered(seconds(c.unauthorizedRetry), random, floor: seconds(c.backoffInitial))
        case .ended(let lasted) where lasted >= c.stableAfter:
            failuresInARow = 1
            base = seconds(c.backoffInitial)
        case .ended, .failed:
            failuresInARow += 1
            base = min(seconds(c.backoffInitial) * pow2(failuresInARow - 1), seconds(c.backoffCap))
        }
        return jittered(base, random, floor: seconds(c.backoffInitial))
    }

    /// Failures since the last stable connection.
    public var failures: Int { failuresInARow }

    private func jittered(_ base: Double, _ random: Double, floor: Double) -> Duration {
        // Never below the initial delay (≥ 10 s): jitter spreads retries later, not sooner.
        let factor = 1 - Self.jitter + 2 * Self.jitter * min(max(random, 0), 1)
        return .milliseconds(Int64((max(base * factor, floor) * 1000).rounded()))
    }

    private func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
    private func pow2(_ n: Int) -> Double { n >= 30 ? Double(1 << 30) : Double(1 << n) }
}
