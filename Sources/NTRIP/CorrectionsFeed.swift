import GatewayCore
import Locking

/// Corrections for one receiver port: the NTRIP client, the queue its frames wait in, and the
/// receiver's last fix it sends upstream as GGA — what a source that owns the port adds.
///
/// The source runs ``run()`` as a child task beside its reads, passes its positions to
/// ``note(_:)``, and writes ``take()`` to the port between reads (`wake` tells it a frame is
/// waiting, e.g. its `Wakeup.signal`). Only the source touches the port.
public final class CorrectionsFeed: Sendable {
    public let queue: CorrectionsQueue
    public let client: NTRIPClient

    public init(configuration: NTRIPConfiguration, clock: any GatewayClock, logger: Logger, stats: ComponentStats? = nil,
                wake: @escaping @Sendable () -> Void) {
        let queue = CorrectionsQueue(pending: wake)
        let fix = FixBox()
        self.queue = queue
        client = NTRIPClient(configuration: configuration, writer: queue, lastFix: { fix.value }, clock: clock, logger: logger, stats: stats)
        box = fix
    }

    private let box: FixBox

    /// Keeps the last position with a fix (events and positions without coordinates are skipped).
    public func note(_ positions: [Position]) {
        guard let p = positions.last(where: { $0.event == nil && $0.mode != .noFix && $0.hasCoordinates }) else { return }
        box.value = p
    }

    /// The last fix noted, nil before the first.
    public var fix: Position? { box.value }

    /// Connects to the caster and keeps the corrections coming until cancelled.
    public func run() async throws { try await client.run() }

    /// The frames waiting, whole and in order, as one buffer to write to the port (empty when none).
    public func take() -> [UInt8] { queue.take() }

    /// Thread-safe holder of the last fix.
    final class FixBox: Sendable {
        private let state = Locked<Position?>(nil)
        var value: Position? {
            get { state.withLock { $0 } }
            set { state.withLock { $0 = newValue } }
        }
    }
}
