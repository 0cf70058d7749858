import GatewayCore
import Synchronization

/// Checks every source plugin's tests can call to show the ``PositionSource`` contract holds:
/// cancellation is honoured, bad input is counted and not thrown, the source reconnects.
///
/// Each check builds the source itself through `make`, with a fresh ``ComponentContext`` whose
/// stats and log lines it inspects, and throws ``SourceConformance/Failure`` when the contract
/// is broken. The bounds are generous: they catch a source that never reacts, not a slow machine.
public enum SourceConformance {
    /// A broken contract, with what was observed.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var check: String
        public var details: String
        public var description: String { "\(check): \(details)" }
    }

    /// A context for a source under test: id `id`, a recording log handler, fresh stats.
    public static func makeContext(id: String = "under_test", clock: any GatewayClock = .system,
                                   log: RecordingLogHandler = RecordingLogHandler()) -> ComponentContext {
        ComponentContext(id: id, kind: .source, logger: log.logger(label: "sources.\(id)"),
                         stats: ComponentStats(id: "sources.\(id)"), clock: clock)
    }

    /// Runs the source, lets it work for `runFor` (or until `ready` holds), cancels it, and
    /// requires `run` to return or throw `CancellationError` within `bound`.
    public static func checkCancellation(
        runFor: Duration = .milliseconds(300), within bound: Duration = .seconds(15),
        ready: (@Sendable (ComponentContext, PositionCollector) -> Bool)? = nil,
        make: (ComponentContext) throws -> any PositionSource
    ) async throws {
        let context = makeContext()
        let collector = PositionCollector()
        let source = try make(context), output = collector.output
        let running = AbandonableRun { try await source.run(output: output) }
        if let ready {
            guard await Poll.until(timeout: bound, { ready(context, collector) }) else {
                _ = await running.stop(within: bound)
                throw Failure(check: "cancellation", details: "the source never became ready")
            }
        } else {
            try? await Task.sleep(for: runFor)
        }
        switch await running.stop(within: bound) {
        case nil: throw Failure(check: "cancellation", details: "run() did not return within \(DurationText.format(bound)) of cancellation")
        case .threw(let e): throw Failure(check: "cancellation", details: "run() threw \(e) instead of CancellationError")
        case .returned: break
        }
    }

    /// Runs the source, calls `feedGarbage` (the test sends noise through the source's input),
    /// and requires one of `counters` (any named counter when nil) to grow while `run` neither
    /// throws nor ends. Returns the source's stats for further checks.
    @discardableResult
    public static func checkBadInputCounted(
        counters: [String]? = nil, within bound: Duration = .seconds(20),
        feedGarbage: @Sendable () async throws -> Void,
        make: (ComponentContext) throws -> any PositionSource
    ) async throws -> ComponentStats {
        let context = makeContext()
        let collector = PositionCollector()
        let source = try make(context), output = collector.output
        let running = AbandonableRun { try await source.run(output: output) }
        defer { running.task.cancel() }
        try await feedGarbage()
        let stats = context.stats
        let counted = await Poll.until(timeout: bound) {
            if running.ended != nil { return true }
            if let counters { return counters.contains { stats.value($0) > 0 } }
            return stats.namedValues.contains { $0.value > 0 }
        }
        if case .threw(let e) = running.ended {
            throw Failure(check: "bad input", details: "run() threw \(e); bad input must be counted and skipped")
        }
        guard counted, running.ended == nil else {
            throw Failure(check: "bad input", details: running.ended != nil
                ? "run() ended on bad input"
                : "no counter grew (\(counters?.joined(separator: ", ") ?? "any named counter")); stats: \(stats.namedValues)")
        }
        _ = await running.stop(within: bound)
        return stats
    }

    /// Runs the source against a peer the test controls: waits for a first position, calls
    /// `peerDown` (the server goes away), then `peerUp` (it comes back, and sends positions),
    /// and requires positions to arrive again, which means the source reconnected by itself.
    ///
    /// After `peerDown` the check waits `settle` (longer than the source's idle flush) so positions
    /// still held from the old connection do not count as a reconnect.
    public static func checkReconnects(
        within bound: Duration = .seconds(30), settle: Duration = .seconds(2),
        peerDown: @Sendable () async throws -> Void,
        peerUp: @Sendable () async throws -> Void,
        make: (ComponentContext) throws -> any PositionSource
    ) async throws {
        let context = makeContext()
        let collector = PositionCollector()
        let source = try make(context), output = collector.output
        let running = AbandonableRun { try await source.run(output: output) }
        defer { running.task.cancel() }
        guard await collector.waitForCount(1, timeout: bound) else {
            throw Failure(check: "reconnect", details: "no position arrived before the peer went down")
        }
        try await peerDown()
        try? await Task.sleep(for: settle)
        let before = collector.count
        try await peerUp()
        let rejoined = await Poll.until(timeout: bound) { collector.count > before || running.ended != nil }
        if let e = running.ended {
            throw Failure(check: "reconnect", details: "run() ended when the peer went away: \(e)")
        }
        guard rejoined else {
            throw Failure(check: "reconnect", details: "no position within \(DurationText.format(bound)) after the peer came back")
        }
        _ = await running.stop(within: bound)
    }
}
