import GatewayCore
import SystemIO
import EnvironmentChecks

/// Where a sink's undelivered messages wait: the `queue` option every delivering sink shares.
public enum OutboxMode: Sendable, Equatable {
    /// An SQLite file at `path`: survives crashes and reboots.
    case disk(path: String, maxRecords: Int, maxAge: Duration?, synchronousFull: Bool)
    /// In memory, bounded; lost when the process stops.
    case memory(maxRecords: Int)
}

/// The configuration of a sink that delivers through an outbox: its `queue` decides whether the
/// sink is durable, which file it claims and where the per-device state file goes beside it.
public protocol QueuedSinkConfiguration: Sendable {
    var queue: OutboxMode { get }
}

/// What ``SinkPlugin`` asks about the queue, answered once for every sink with a `queue` option.
extension SinkPlugin where Configuration: QueuedSinkConfiguration {
    public static func isDurable(_ configuration: Configuration) -> Bool { OutboxOptions.isDurable(configuration.queue) }
    public static func stateStorePath(of configuration: Configuration) -> String? { OutboxOptions.stateStorePath(configuration.queue) }
    public static func claims(of configuration: Configuration) -> [String] { OutboxOptions.claims(configuration.queue) }
}

/// The `queue` options of http, mqtt and nats: documented, read and opened in one place.
public enum OutboxOptions {
    public static let maxRecords = Option("queue.max_records", default: 1_000_000, in: 1...1_000_000_000,
        "Most positions kept; beyond it the oldest are dropped, counted and logged.")
    public static let synchronous = Option("queue.synchronous", choices: ["full", "normal"], default: "full",
        "full: each commit survives power loss; normal: survives a crash of the process, faster.")

    /// Records the memory-only queue holds before it drops the oldest.
    public static let memoryCapacity = 100_000

    /// The rows for a plugin's option list (and README table), in this order.
    public static let specs: [OptionSpec] = [
        OptionSpec("queue", "object | null", required: true, "The queue; null keeps it in memory only (lossy: lost on exit, crash or after \(memoryCapacity) queued positions)."),
        OptionSpec("queue.path", "path", required: true, "SQLite file of the durable queue (WAL mode), one per sink; created if missing, owner-only (0600)."),
        maxRecords.spec,
        OptionSpec("queue.max_age", "duration", default: "none", "Drop queued positions older than this, counted from the later of their fix time and their commit time (right both on a device whose clock is not set yet and for replays of old logs); counted and logged."),
        synchronous.spec,
    ]

    /// Reads `queue` (required: an object, or null for the lossy memory queue).
    public static func read(_ options: inout OptionReader) -> OutboxMode {
        let hasQueue = options.has("queue")
        if var queue = options.object("queue") {
            let path = queue.filePath("path")
            if path == nil { queue.report("path", "required option is missing") }
            let records = queue.read(maxRecords)
            let maxAge = queue.duration("max_age")
            let sync = queue.read(synchronous)
            queue.finish()
            return .disk(path: path ?? "", maxRecords: records, maxAge: maxAge, synchronousFull: sync == "full")
        }
        if !hasQueue {
            options.report("queue", "required option is missing: give {\"path\": FILE} for a durable queue, or null for a memory-only queue that loses positions on exit")
        }
        // Present but neither an object nor null: object() has reported it.
        return .memory(maxRecords: memoryCapacity)
    }

    /// Whether upstream waits for the sink's commit (a durable queue).
    public static func isDurable(_ mode: OutboxMode) -> Bool {
        if case .disk = mode { return true }
        return false
    }

    /// The queue file, which no two components may share.
    public static func claims(_ mode: OutboxMode) -> [String] {
        if case .disk(let path, _, _, _) = mode { return ["file \(path)"] }
        return []
    }

    /// The per-device state file beside a durable queue (``SinkPlugin/stateStorePath(of:)``).
    public static func stateStorePath(_ mode: OutboxMode) -> String? {
        if case .disk(let path, _, _, _) = mode { return StateSettings.path(besideQueue: path) }
        return nil
    }

    /// Opens the outbox; the memory mode logs that it is lossy.
    public static func open(_ mode: OutboxMode, context: ComponentContext) throws -> any Outbox {
        switch mode {
        case .disk(let path, let maxRecords, _, let synchronousFull):
            return try SQLiteOutbox(path: path, maxRecords: maxRecords, synchronousFull: synchronousFull)
        case .memory(let maxRecords):
            context.logger.warning("queue is null: positions are kept in memory only and are lost on exit or crash")
            return MemoryOutbox(capacity: maxRecords)
        }
    }

    /// The queue's environment, for `locgate validate`: the checks its opening makes, without
    /// creating the file; the free space as info.
    public static func checkEnvironment(_ mode: OutboxMode, context: EnvironmentContext) -> [EnvironmentFinding] {
        guard case .disk(let path, _, _, _) = mode else { return [] }
        do {
            let free = try SQLiteOutbox.inspect(path: path)
            return free.map { [context.info("queue.path", "\(FileCheck.formatBytes($0)) free for \(FileCheck.absolute(path))")] } ?? []
        } catch {
            return [context.error("queue.path", error.description)]
        }
    }

    /// `queue.max_age`, if set.
    static func maxAge(_ mode: OutboxMode) -> Duration? {
        if case .disk(_, _, let maxAge?, _) = mode { return maxAge }
        return nil
    }
}
