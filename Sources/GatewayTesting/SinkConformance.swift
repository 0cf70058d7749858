import GatewayCore
import GatewayRuntime
import Locking

/// Checks every sink plugin's tests call to show the ``PositionSink`` contract holds: everything
/// read is delivered and counted, an acknowledgement comes only after what it covers was
/// committed, and `run` ends promptly when cancelled or asked to stop.
///
/// Each check builds the sink itself through `make`, with a fresh ``ComponentContext`` whose stats
/// it inspects, feeds it through a real ``SinkBuffer``, and throws ``SinkConformance/Failure`` when
/// the contract is broken. The bounds are generous: they catch a sink that never reacts, not a
/// slow machine.
public enum SinkConformance {
    /// A broken contract, with what was observed.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var check: String
        public var details: String
        public var description: String { "\(check): \(details)" }
    }

    /// A context for a sink under test: id `id`, a recording log handler, fresh stats.
    public static func makeContext(id: String = "under_test", log: RecordingLogHandler = RecordingLogHandler(minimumLevel: .debug)) -> ComponentContext {
        ComponentContext(id: id, kind: .sink, logger: log.logger(label: "sinks.\(id)"), stats: ComponentStats(id: "sinks.\(id)"))
    }

    /// Feeds `positions` in batches of `batchSize`, closes the input and requires `run` to return
    /// within `bound`, every position's id to be among `delivered()` (what the peer, file or
    /// stream holds afterwards), and the sink's `emitted` count to equal what it was given.
    /// Returns the sink's stats for further checks.
    @discardableResult
    public static func checkDeliversAndCounts(
        _ positions: [Position], batchSize: Int = 10, within bound: Duration = .seconds(60),
        make: (ComponentContext) throws -> any PositionSink,
        delivered: @Sendable () async throws -> [String]
    ) async throws -> ComponentStats {
        let context = makeContext()
        let buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: false, stats: context.stats, clock: context.clock)
        let sink = try make(context)
        let running = AbandonableRun { try await sink.run(input: buffer) }
        defer { running.task.cancel() }
        for start in stride(from: 0, to: positions.count, by: batchSize) {
            await buffer.send(Array(positions[start..<min(start + batchSize, positions.count)]))
        }
        buffer.close()
        switch await running.wait(within: bound) {
        case nil: throw Failure(check: "delivery", details: "run() did not return within \(DurationText.format(bound)) of the input's end")
        case .threw(let e): throw Failure(check: "delivery", details: "run() threw \(e)")
        case .returned: break
        }
        let found = Set(try await delivered())
        let missing = positions.map(\.id).filter { !found.contains($0) }
        guard missing.isEmpty else {
            throw Failure(check: "delivery", details: "\(missing.count) of \(positions.count) positions not delivered, first \(missing.prefix(3))")
        }
        guard context.stats.emitted == positions.count else {
            throw Failure(check: "delivery", details: "emitted counts \(context.stats.emitted), \(positions.count) were delivered")
        }
        return context.stats
    }

    /// Feeds `positions` in batches of `batchSize` through a durable buffer (each send returns
    /// once the sink acknowledged it) and, inside every acknowledgement, calls `committed` — what
    /// is committed right now: a file's records, a receiver's log, a queue file's rows — which
    /// must hold every position the acknowledgement covers. Fails when the sink acknowledges
    /// before committing, or when a batch is not acknowledged within `bound`.
    ///
    /// `committed` runs on the sink's task, so it must be quick and must not wait on a process.
    public static func checkAcknowledgesOnlyAfterCommit(
        _ positions: [Position], batchSize: Int = 10, within bound: Duration = .seconds(60),
        make: (ComponentContext) throws -> any PositionSink,
        committed: @escaping @Sendable () -> Set<String>
    ) async throws {
        let context = makeContext()
        let buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: true, stats: context.stats, clock: context.clock)
        let input = CommitCheckingInput(buffer, committed: committed)
        let sink = try make(context)
        let running = AbandonableRun { try await sink.run(input: input) }
        defer { running.task.cancel() }
        for start in stride(from: 0, to: positions.count, by: batchSize) {
            let batch = Array(positions[start..<min(start + batchSize, positions.count)])
            let sent = await send(batch, to: buffer, of: running, within: bound)
            if let violation = input.violations.first { throw Failure(check: "acknowledgement", details: violation) }
            guard sent else {
                if case .threw(let e) = running.ended { throw Failure(check: "acknowledgement", details: "run() threw \(e)") }
                throw Failure(check: "acknowledgement", details: "positions \(start)… were not acknowledged within \(DurationText.format(bound))")
            }
        }
        // Not closed: a durable sink whose peer is down would deliver until cancelled.
        guard input.acknowledgedPositions == positions.count else {
            throw Failure(check: "acknowledgement", details: "\(input.acknowledgedPositions) of \(positions.count) positions acknowledged")
        }
    }

    /// Runs the sink with an input that stays open, gives it `positions` (which it may be unable
    /// to deliver: a peer that is down, a pipe nobody reads), waits `runFor`, cancels it, and
    /// requires `run` to return or throw `CancellationError` within `bound`.
    public static func checkCancellation(
        _ positions: [Position], runFor: Duration = .milliseconds(300), within bound: Duration = .seconds(15),
        make: (ComponentContext) throws -> any PositionSink
    ) async throws {
        let context = makeContext()
        let buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: false, stats: context.stats, clock: context.clock)
        let sink = try make(context)
        let running = AbandonableRun { try await sink.run(input: buffer) }
        buffer.enqueueWithoutWaiting(positions)
        try? await Task.sleep(for: runFor)
        running.task.cancel()
        switch await running.wait(within: bound) {
        case nil: throw Failure(check: "cancellation", details: "run() did not return within \(DurationText.format(bound)) of cancellation")
        case .threw(let e): throw Failure(check: "cancellation", details: "run() threw \(e) instead of CancellationError")
        case .returned: break
        }
    }

    /// For a sink with a durable queue whose peer is down: gives it `positions`, closes the input,
    /// and fires the pipeline's stop request (a signal): `run` must return within `bound` without
    /// throwing, the undelivered positions left queued for the next start.
    public static func checkStopRequest(
        _ positions: [Position], within bound: Duration = .seconds(15),
        make: (ComponentContext) throws -> any PositionSink
    ) async throws {
        let context = makeContext()
        let buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: true, stats: context.stats, clock: context.clock)
        let sink = try make(context)
        let running = AbandonableRun { try await sink.run(input: buffer) }
        defer { running.task.cancel() }
        // Durable: the send returns once the batch is in the queue.
        guard await send(positions, to: buffer, of: running, within: bound) else {
            throw Failure(check: "stop request", details: "the positions were not acknowledged (queued) within \(DurationText.format(bound))")
        }
        buffer.close()
        buffer.stopNow.fire(reason: "SIGTERM")
        switch await running.wait(within: bound) {
        case nil: throw Failure(check: "stop request", details: "run() did not return within \(DurationText.format(bound)) of the stop request")
        case .threw(let e): throw Failure(check: "stop request", details: "run() threw \(e)")
        case .returned: break
        }
    }

    // MARK: - Feeding a sink

    /// Sends `batch` through the durable `buffer`, which returns once the sink acknowledged it;
    /// false when `bound` passed or `run` ended first.
    private static func send(_ batch: [Position], to buffer: SinkBuffer, of running: AbandonableRun, within bound: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await buffer.send(batch); return true }
            group.addTask {
                _ = await Poll.until(timeout: bound) { running.ended != nil }
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}

/// A ``SinkInput`` over a ``SinkBuffer`` that checks, inside every acknowledgement, that what
/// it covers is committed.
private final class CommitCheckingInput: SinkInput, Sendable {
    private struct State {
        /// The ids of each batch taken, under the buffer's mark after taking it.
        var taken: [(mark: SinkMark, ids: [String])] = []
        var acknowledged = SinkMark(0)
        var acknowledgedPositions = 0
        var violations: [String] = []
    }

    private let buffer: SinkBuffer
    private let committed: @Sendable () -> Set<String>
    private let state = Locked(State())

    init(_ buffer: SinkBuffer, committed: @escaping @Sendable () -> Set<String>) {
        self.buffer = buffer
        self.committed = committed
    }

    var violations: [String] { state.withLock { $0.violations } }
    var acknowledgedPositions: Int { state.withLock { $0.acknowledgedPositions } }

    func next(timeout: Duration?) async -> SinkEvent {
        let event = await buffer.next(timeout: timeout)
        if case .positions(let batch) = event {
            let mark = buffer.received
            state.withLock { $0.taken.append((mark, batch.map(\.id))) }
        }
        return event
    }

    var received: SinkMark { buffer.received }
    var stopRequest: (any SinkStopRequest)? { buffer.stopRequest }

    func acknowledge() { acknowledge(through: buffer.received) }

    func acknowledge(through mark: SinkMark) {
        let covered: [String] = state.withLock { s in
            s.taken.filter { $0.mark > s.acknowledged && $0.mark <= mark }.flatMap(\.ids)
        }
        let now = committed()
        let missing = covered.filter { !now.contains($0) }
        state.withLock { s in
            if !missing.isEmpty {
                s.violations.append("acknowledged \(covered.count) positions, \(missing.count) not committed yet (first \(missing.prefix(3)))")
            }
            if mark > s.acknowledged {
                s.acknowledged = mark
                s.acknowledgedPositions += covered.count
            }
        }
        buffer.acknowledge(through: mark)
    }
}
