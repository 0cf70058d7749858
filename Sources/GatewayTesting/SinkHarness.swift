import GatewayCore
import GatewayRuntime

/// A sink plugin's sink running in this process, fed through a real ``SinkBuffer`` as a
/// pipeline feeds it, logging into a ``RecordingLogHandler``.
///
/// Every sink's tests use this one harness; a test target names its plugin once
/// (`typealias Harness = SinkHarness<HTTPSinkPlugin>`).
public struct SinkHarness<Plugin: SinkPlugin>: Sendable {
    public let sink: any PositionSink
    public let buffer: SinkBuffer
    public let stats: ComponentStats
    public let log: RecordingLogHandler
    public let context: ComponentContext

    /// Builds the sink `id` from a configuration. `capacity` is the buffer's; its durable mode is
    /// the plugin's for this configuration, as in a pipeline.
    public init(_ configuration: Plugin.Configuration, id: String = "up", logLevel: LogLevel = .debug,
                capacity: Int = 100_000, clock: any GatewayClock = .system, commands: (any CommandCenter)? = nil) throws {
        stats = ComponentStats(id: id)
        log = RecordingLogHandler(minimumLevel: logLevel)
        context = ComponentContext(id: id, kind: .sink, logger: log.logger(label: "sinks.\(id)"), stats: stats, clock: clock,
                                   commands: commands)
        sink = try Plugin.makeSink(configuration, context: context)
        buffer = SinkBuffer(capacity: capacity, policy: .block, durable: Plugin.isDurable(configuration), stats: stats, clock: clock)
    }

    /// Builds the sink `id` from JSON options (``PluginOptions/valid(_:_:path:environment:baseDirectory:)``:
    /// any configuration problem throws); relative paths in them are read from `baseDirectory`.
    public init(_ json: String, id: String = "up", environment: [String: String] = [:], baseDirectory: String = ".",
                logLevel: LogLevel = .debug, capacity: Int = 100_000, clock: any GatewayClock = .system, commands: (any CommandCenter)? = nil) throws {
        let configuration = try PluginOptions.valid(Plugin.self, json, path: "sinks.\(id)", environment: environment,
                                                    baseDirectory: baseDirectory)
        try self.init(configuration, id: id, logLevel: logLevel, capacity: capacity, clock: clock, commands: commands)
    }

    /// Runs the sink while `feed` sends positions; closes the input after `feed` and waits for the sink to end.
    public func run(_ feed: @Sendable @escaping (SinkBuffer) async throws -> Void = { _ in }) async throws {
        let sink = self.sink, buffer = self.buffer
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await sink.run(input: buffer) }
            try await feed(buffer)
            buffer.close()
            try await group.waitForAll()
        }
    }

    /// Starts the sink in a task of its own, for a test that looks at what the sink wrote between
    /// batches (``Running/send(_:within:)`` waits for each batch's acknowledgement).
    public func start() -> Running { Running(self) }

    /// A sink started by ``start()``.
    public final class Running: Sendable {
        public let harness: SinkHarness
        private let task: Task<Void, any Error>

        init(_ harness: SinkHarness) {
            self.harness = harness
            let sink = harness.sink, buffer = harness.buffer
            task = Task { try await sink.run(input: buffer) }
        }

        public var log: RecordingLogHandler { harness.log }

        /// Sends a batch and waits until the sink acknowledged all of it (its `emitted` count rose
        /// by the batch's size); false when that did not happen `within` the limit.
        public func send(_ batch: [Position], within limit: Duration = .seconds(20)) async -> Bool {
            let stats = harness.stats, before = stats.emitted
            await harness.buffer.send(batch)
            return await Poll.until(timeout: limit) { stats.emitted >= before + batch.count }
        }

        /// Closes the input and waits for the sink to end (rethrowing its error).
        public func finish() async throws {
            harness.buffer.close()
            try await task.value
        }
    }

    /// The log so far, one line each.
    public var logText: String { log.entries.map(\.description).joined(separator: "\n") }
}
