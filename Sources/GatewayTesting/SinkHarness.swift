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
                capacity: Int = 100_000) throws {
        stats = ComponentStats(id: id)
        log = RecordingLogHandler(minimumLevel: logLevel)
        context = ComponentContext(id: id, kind: .sink, logger: log.logger(label: "sinks.\(id)"), stats: stats)
        sink = try Plugin.makeSink(configuration, context: context)
        buffer = SinkBuffer(capacity: capacity, policy: .block, durable: Plugin.isDurable(configuration), stats: stats)
    }

    /// Builds the sink `id` from JSON options (``PluginOptions/valid(_:_:path:environment:baseDirectory:)``:
    /// any configuration problem throws).
    public init(_ json: String, id: String = "up", environment: [String: String] = [:], logLevel: LogLevel = .debug,
                capacity: Int = 100_000) throws {
        let configuration = try PluginOptions.valid(Plugin.self, json, path: "sinks.\(id)", environment: environment)
        try self.init(configuration, id: id, logLevel: logLevel, capacity: capacity)
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

    /// The log so far, one line each.
    public var logText: String { log.entries.map(\.description).joined(separator: "\n") }
}
