import Locking
import Synchronization

/// The three kinds of pipeline component.
public enum ComponentKind: String, Sendable, Hashable, CaseIterable {
    case source, transform, sink

    /// The configuration map that holds components of this kind (`sources`, `transforms`, `sinks`).
    public var section: String { rawValue + "s" }
}

/// What the runtime hands a component when it builds it.
public struct ComponentContext: Sendable {
    /// The component's id (its key in the configuration).
    public let id: String
    public let kind: ComponentKind
    /// Labelled `<section>.<id>`, e.g. `sources.receiver`.
    public let logger: Logger
    public let stats: ComponentStats
    public let clock: any GatewayClock
    /// The per-device state store (`settings.state`), for sources that keep state of their own
    /// (``SourcePlugin/keepsState(_:)``: JT/T 808's authentication codes); nil when state is kept
    /// in memory only, and for every other component (transforms reach it through the runtime).
    public let stateStore: (any DeviceStateStore)?
    /// The gateway's commands to devices: listening sources carry them, the `commands` sink
    /// submits them; nil when the pipeline keeps none.
    public let commands: (any CommandCenter)?

    public init(id: String, kind: ComponentKind, logger: Logger, stats: ComponentStats, clock: any GatewayClock = .system,
                stateStore: (any DeviceStateStore)? = nil, commands: (any CommandCenter)? = nil) {
        self.id = id
        self.kind = kind
        self.logger = logger
        self.stats = stats
        self.clock = clock
        self.stateStore = stateStore
        self.commands = commands
    }
}

// MARK: - Sources

/// Produces positions until cancelled or its input ends.
///
/// Implementation requirements:
/// - `run` returns when the input has ended (a replay without `loop`) and throws
///   `CancellationError` (or returns) promptly when its task is cancelled: blocking reads use a
///   timeout and check `Task.isCancelled`.
/// - A source that talks to a device or server owns reconnection: on a fault it logs, waits with
///   capped exponential backoff (``Backoff``) and tries again; it never ends the pipeline for a
///   transient fault. It throws only for faults that retrying cannot fix (a replay file that does not exist).
/// - Bad input (malformed sentences, bad JSON, noise) is counted in `context.stats` and skipped,
///   never thrown.
/// - Positions go out in batches through ``SourceOutput/emit(_:)``, which suspends while
///   downstream buffers are full (backpressure).
public protocol PositionSource: Sendable {
    /// Runs until the input ends or the task is cancelled.
    func run(output: SourceOutput) async throws
}

/// The path from a source into the pipeline.
public struct SourceOutput: Sendable {
    // The batch is handed on, not lent: a transform downstream then changes it in place
    // instead of copying it while the source still holds it.
    private let deliver: @Sendable (consuming [Position], BatchAcknowledgement?) async -> Void

    /// An output that tracks acknowledgements (the runtime's): `deliver` retains the
    /// acknowledgement once for every sink buffer it hands positions to.
    public init(tracking deliver: @escaping @Sendable (consuming [Position], BatchAcknowledgement?) async -> Void) {
        self.deliver = deliver
    }

    /// An output without tracking (tests, collectors): an acknowledgement is called as soon as
    /// `deliver` returns.
    public init(deliver: @escaping @Sendable ([Position]) async -> Void) {
        self.deliver = { batch, _ in await deliver(batch) }
    }

    /// Sends a batch downstream; suspends while a `block` buffer downstream is full.
    public func emit(_ positions: consuming [Position]) async {
        guard !positions.isEmpty else { return }
        await deliver(positions, nil)
    }

    /// Sends a batch downstream and calls `whenHandled` once the pipeline has taken responsibility
    /// for every position of it: each sink that received it (or what transforms made of it) has
    /// acknowledged it, and positions that transforms dropped count as handled. A broker source
    /// acknowledges its messages to the broker only then (end-to-end acknowledgement).
    ///
    /// `whenHandled` runs on whichever task completes the batch; it must be quick and must not
    /// block. It is never called for positions lost at shutdown (their sink stopped first), so
    /// the broker redelivers them. Emitting does not wait for the acknowledgement: bound what is
    /// outstanding with ``UnacknowledgedWindow``.
    public func emit(_ positions: consuming [Position], whenHandled: @escaping @Sendable () -> Void) async {
        let ack = BatchAcknowledgement(whenHandled)
        if !positions.isEmpty { await deliver(positions, ack) }
        ack.release()
    }
}

/// Counts the places a batch still has to be handled; calls its closure when none is left.
///
/// Starts at one (the emitter's own hold, released after routing), so a batch that every
/// transform dropped is handled as soon as routing ends. Steps registered with
/// ``beforeHandled(_:)`` run between the last release and the closure (the runtime saves the
/// per-device state the batch changed there, so what is acknowledged upstream has its state saved).
public final class BatchAcknowledgement: Sendable {
    public typealias Step = @Sendable (_ done: @escaping @Sendable () -> Void) -> Void
    private let pending = Atomic<Int>(1)
    private let whenHandled: @Sendable () -> Void
    private let steps = Locked<[Step]>([])

    /// An acknowledgement held once (by its creator, who releases it after handing it on).
    public init(_ whenHandled: @escaping @Sendable () -> Void) {
        self.whenHandled = whenHandled
    }

    /// One more place (a sink buffer) must handle the batch.
    public func retain() { pending.add(1, ordering: .relaxed) }

    /// Runs `step` once every place handled the batch; the closure waits until every step has
    /// called its `done`. Register while holding the acknowledgement (before your release).
    public func beforeHandled(_ step: @escaping Step) {
        steps.withLock { $0.append(step) }
    }

    /// One place handled it; the last release runs the steps, then the closure.
    public func release() {
        guard pending.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        let steps = self.steps.withLock { s -> [Step] in defer { s = [] }; return s }
        if steps.isEmpty { return whenHandled() }
        let finished = Countdown(count: steps.count, then: whenHandled)
        for step in steps { step { finished.done() } }
    }
}

/// Calls its closure once `count` parts are done: the steps of an acknowledgement, the held
/// positions of a batch (a source's reorder window).
public final class Countdown: Sendable {
    private let left: Atomic<Int>
    private let then: @Sendable () -> Void

    public init(count: Int, then: @escaping @Sendable () -> Void) {
        left = Atomic(count)
        self.then = then
    }

    /// One part is done; the last one calls the closure.
    public func done() {
        if left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { then() }
    }
}

/// Bounds what a source has emitted but not yet seen acknowledged (`max_unacked`).
///
/// `acquire` waits while the limit is reached; the acknowledgement releases. A single batch
/// larger than the limit still goes when nothing else is outstanding.
public final class UnacknowledgedWindow: Sendable {
    private struct State {
        var outstanding = 0
        var waiters: [(id: UInt64, need: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var nextID: UInt64 = 0
    }

    public let limit: Int
    private let state = Locked(State())

    public init(limit: Int) { self.limit = max(1, limit) }

    /// Positions emitted and not yet acknowledged.
    public var outstanding: Int { state.withLock { $0.outstanding } }

    /// Callers waiting in `acquire`.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Room left before `acquire` waits.
    public var room: Int { max(0, limit - outstanding) }

    /// Reserves `n` positions; waits while the window is full. Returns early (reserving anyway)
    /// when the task is cancelled.
    public func acquire(_ n: Int) async {
        let id: UInt64 = state.withLock { s in s.nextID += 1; return s.nextID }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.outstanding == 0 || s.outstanding + n <= limit || Task.isCancelled {
                        s.outstanding += n
                        return true
                    }
                    s.waiters.append((id, n, c))
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let c: CheckedContinuation<Void, Never>? = state.withLock { s in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                let w = s.waiters.remove(at: i)
                s.outstanding += w.need
                return w.continuation
            }
            c?.resume()
        }
    }

    /// Returns `n` positions to the window (their acknowledgement came).
    public func release(_ n: Int) {
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { s in
            s.outstanding = max(0, s.outstanding - n)
            var ready: [CheckedContinuation<Void, Never>] = []
            // In order: the first waiter goes before later, smaller ones.
            while let w = s.waiters.first, s.outstanding == 0 || s.outstanding + w.need <= limit {
                s.waiters.removeFirst()
                s.outstanding += w.need
                ready.append(w.continuation)
            }
            return ready
        }
        for c in ready { c.resume() }
    }
}

// MARK: - Transforms

/// Zero or more positions out for each position in, with state.
///
/// Implementation requirements:
/// - `process` is synchronous and quick: transforms run inline on the path from their input,
///   one call at a time (the runtime serialises calls), so no locking is needed inside.
/// - A transform that drops a position counts why in its stats (`context.stats.count("dropped.hdop")`).
/// - Time-dependent behaviour uses the positions' own times, so replays behave like live input;
///   a transform that must act without input (a timeout) sets ``tickInterval`` and gets ``tick(now:into:)``.
public protocol PositionTransform: Sendable {
    /// Handles one position, appending what passes (possibly changed, possibly several) to `output`.
    mutating func process(_ position: Position, into output: inout [Position])

    /// Handles a whole batch in place: what passes (possibly changed, possibly several per
    /// position) replaces the batch's contents, in order.
    ///
    /// The runtime calls this. The default calls ``process(_:into:)`` per position
    /// (``processEach(batch:)``); a transform that changes or drops positions one for one
    /// implements it to change them where they lie (``Swift/Array/updateAndFilter(_:)``), so a
    /// position is not copied into a new array at every transform.
    mutating func process(batch: inout [Position])

    /// How often ``tick(now:into:)`` is called; nil (the default) for never.
    var tickInterval: Duration? { get }

    /// Called every ``tickInterval`` with the wall-clock time.
    mutating func tick(now: Timestamp, into output: inout [Position])

    /// Called once when every input has ended, to release held positions.
    mutating func finish(into output: inout [Position])

    /// The per-device state changed since the last call, for the runtime to save: provided by
    /// ``StatefulTransform`` (each changed device's snapshot, nil for a device forgotten); a
    /// transform without saved state returns nothing.
    mutating func takeStateChanges() -> [(device: String, state: JSONValue?)]
}

// MARK: - Default implementations

extension PositionTransform {
    public mutating func process(batch: inout [Position]) { processEach(batch: &batch) }

    /// The batch through ``process(_:into:)``, one position at a time: the default of
    /// ``process(batch:)``, and the fallback of batch implementations for the positions they
    /// do not handle in place (those that emit several).
    public mutating func processEach(batch: inout [Position]) {
        var out: [Position] = []
        out.reserveCapacity(batch.count)
        for p in batch { process(p, into: &out) }
        batch = out
    }

    public var tickInterval: Duration? { nil }
    public mutating func tick(now: Timestamp, into output: inout [Position]) {}
    public mutating func finish(into output: inout [Position]) {}
    public mutating func takeStateChanges() -> [(device: String, state: JSONValue?)] { [] }
}

extension Array where Element == Position {
    /// Lets `body` change each position where it lies and keeps those it returns true for, in
    /// order: the in-place form of a transform that passes at most one position per position.
    public mutating func updateAndFilter(_ body: (inout Position) throws -> Bool) rethrows {
        var kept = 0
        // Through one buffer: `self[i]` checks that the storage is unique for every element.
        try withUnsafeMutableBufferPointer { positions in
            for i in positions.indices {
                if try body(&positions[i]) {
                    if kept != i { positions.swapAt(kept, i) }
                    kept += 1
                }
            }
        }
        if kept < count { removeLast(count - kept) }
    }
}

// MARK: - Sinks

/// Consumes positions: batches, delivers, flushes on shutdown.
///
/// Implementation requirements:
/// - `run` reads batches from `input` until it returns `.end`, delivers or persists everything it
///   read, and returns. Shutdown closes the input; the runtime cancels `run` when the shutdown
///   deadline passes, so long waits must observe cancellation. A sink whose undelivered positions
///   are safe on disk may return sooner: once the input ended and ``SinkInput/stopRequest`` fired.
/// - A sink that promises delivery calls ``SinkInput/acknowledge()`` only after what it received
///   is persisted: in `durable` mode the upstream waits for that acknowledgement.
/// - A write error that retrying cannot fix is thrown: the pipeline then shuts down and exits 1.
public protocol PositionSink: Sendable {
    func run(input: any SinkInput) async throws
}

/// What a sink reads from.
public enum SinkEvent: Sendable {
    case positions([Position])
    /// Nothing arrived within the timeout (time to flush a batch on its interval).
    case timeout
    /// Every input has ended (or shutdown began) and the buffer is empty.
    case end
}

/// The bounded buffer in front of a sink.
public protocol SinkInput: Sendable {
    /// The next batch, or `.end`; with a timeout, `.timeout` when nothing arrived in time.
    func next(timeout: Duration?) async -> SinkEvent
    /// Releases upstream senders waiting for everything received so far to be persisted.
    func acknowledge()
    /// Everything the sink has received so far, as a mark to acknowledge later: a sink that
    /// persists nothing (a memory queue) acknowledges what it received once it was delivered.
    var received: SinkMark { get }
    /// Releases upstream senders waiting for what was received up to `mark`.
    func acknowledge(through mark: SinkMark)
    /// Set when the pipeline may ask its sinks to stop without waiting for delivery (on
    /// SIGINT/SIGTERM, or when a component failed): a sink whose queue is durable then stops once
    /// what it received is committed, and what is undelivered stays queued for the next start.
    var stopRequest: (any SinkStopRequest)? { get }
}

/// The pipeline's request to stop at once (``SinkInput/stopRequest``).
public protocol SinkStopRequest: Sendable {
    /// Returns once the stop is requested, or when the waiting task is cancelled.
    func wait() async
}

/// A point in what a sink received (``SinkInput/received``).
public struct SinkMark: Sendable, Hashable, Comparable {
    public let value: UInt64

    public init(_ value: UInt64) { self.value = value }

    public static func < (a: SinkMark, b: SinkMark) -> Bool { a.value < b.value }
}

extension SinkInput {
    /// Inputs without marks acknowledge everything received (``acknowledge()``).
    public var received: SinkMark { SinkMark(0) }
    public func acknowledge(through mark: SinkMark) { acknowledge() }
    /// Inputs that never ask for a prompt stop: sinks deliver until the input ends.
    public var stopRequest: (any SinkStopRequest)? { nil }

    /// The next batch, or nil at the end.
    public func next() async -> [Position]? {
        while true {
            switch await next(timeout: nil) {
            case .positions(let p): return p
            case .end: return nil
            case .timeout: continue
            }
        }
    }
}
