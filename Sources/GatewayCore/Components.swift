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

    public init(id: String, kind: ComponentKind, logger: Logger, stats: ComponentStats, clock: any GatewayClock = SystemClock()) {
        self.id = id
        self.kind = kind
        self.logger = logger
        self.stats = stats
        self.clock = clock
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
    private let deliver: @Sendable ([Position]) async -> Void

    public init(deliver: @escaping @Sendable ([Position]) async -> Void) {
        self.deliver = deliver
    }

    /// Sends a batch downstream; suspends while a `block` buffer downstream is full.
    public func emit(_ positions: [Position]) async {
        guard !positions.isEmpty else { return }
        await deliver(positions)
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

    /// How often ``tick(now:into:)`` is called; nil (the default) for never.
    var tickInterval: Duration? { get }

    /// Called every ``tickInterval`` with the wall-clock time.
    mutating func tick(now: Timestamp, into output: inout [Position])

    /// Called once when every input has ended, to release held positions.
    mutating func finish(into output: inout [Position])
}

// MARK: - Default implementations

extension PositionTransform {
    public var tickInterval: Duration? { nil }
    public mutating func tick(now: Timestamp, into output: inout [Position]) {}
    public mutating func finish(into output: inout [Position]) {}
}

// MARK: - Sinks

/// Consumes positions: batches, delivers, flushes on shutdown.
///
/// Implementation requirements:
/// - `run` reads batches from `input` until it returns `.end`, delivers or persists everything it
///   read, and returns. Shutdown closes the input; the runtime cancels `run` when the shutdown
///   deadline passes, so long waits must observe cancellation.
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
}

extension SinkInput {
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
