import GatewayCore
import Locking

/// Everything a source emitted, in order, safe to read from the test while the source runs.
///
/// Use ``output`` as a source's ``SourceOutput``, or ``CollectingSink`` at the end of a pipeline.
public final class PositionCollector: Sendable {
    private let state = Locked<(positions: [Position], batches: Int)>(([], 0))

    public init() {}

    /// A `SourceOutput` that appends each batch here.
    public var output: SourceOutput {
        SourceOutput { [self] batch in self.append(batch) }
    }

    /// Appends a batch (as an emit would).
    public func append(_ batch: [Position]) {
        state.withLock { s in
            s.positions += batch
            s.batches += 1
        }
    }

    /// Positions collected so far.
    public var positions: [Position] { state.withLock { $0.positions } }
    /// How many positions were collected so far.
    public var count: Int { state.withLock { $0.positions.count } }
    /// How many batches arrived.
    public var batches: Int { state.withLock { $0.batches } }

    /// Forgets what was collected.
    public func removeAll() { state.withLock { $0 = ([], 0) } }

    /// Waits (polling) until at least `count` positions arrived; false if `timeout` passed first.
    @discardableResult
    public func waitForCount(_ count: Int, timeout: Duration = .seconds(20)) async -> Bool {
        await Poll.until(timeout: timeout) { self.count >= count }
    }
}

/// A sink that keeps every position it reads (acknowledging each batch) in a ``PositionCollector``.
public struct CollectingSink: PositionSink {
    public let collector: PositionCollector

    public init(collector: PositionCollector = PositionCollector()) {
        self.collector = collector
    }

    public func run(input: any SinkInput) async throws {
        while let batch = await input.next() {
            collector.append(batch)
            input.acknowledge()
        }
    }
}

/// Polling with a generous timeout: how tests wait for something to happen without asserting on time.
public enum Poll {
    /// Checks `condition` every `interval` until it holds (true) or `timeout` passes (false).
    /// Uses the real clock: this is the test waiting, not the code under test.
    public static func until(timeout: Duration = .seconds(20), interval: Duration = .milliseconds(10),
                             _ condition: @Sendable () async -> Bool) async -> Bool {
        let clock = SystemClock.system
        let deadline = clock.monotonicNow() + timeout
        while true {
            if await condition() { return true }
            if clock.monotonicNow() >= deadline { return false }
            do { try await Task.sleep(for: interval) } catch { return await condition() }
        }
    }

    /// `until` for a synchronous condition that reads state the test owns (a process, a file).
    public static func until(timeout: Duration = .seconds(20), interval: Duration = .milliseconds(10),
                             _ condition: () -> Bool) async -> Bool {
        let clock = SystemClock.system
        let deadline = clock.monotonicNow() + timeout
        while true {
            if condition() { return true }
            if clock.monotonicNow() >= deadline { return false }
            do { try await Task.sleep(for: interval) } catch { return condition() }
        }
    }
}
