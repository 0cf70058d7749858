import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import MQTTOutput
import Testing

/// The package root, found from this file's path.
let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A sink configuration from JSON text; problems fail the test.
func configuration(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> MQTTSinkConfiguration {
    let (c, problems) = try PluginOptions.read(MQTTSinkPlugin.self, json, path: "sinks.up")
    #expect(problems.isEmpty, "\(problems)", sourceLocation: sourceLocation)
    return c
}

/// A running in-process sink fed through a real `SinkBuffer`, logging into a recorder.
struct SinkHarness {
    let sink: any PositionSink
    let buffer: SinkBuffer
    let stats: ComponentStats
    let log: RecordingLogHandler

    init(_ configuration: MQTTSinkConfiguration, id: String = "up") throws {
        stats = ComponentStats(id: id)
        log = RecordingLogHandler(minimumLevel: .debug)
        let context = ComponentContext(id: id, kind: .sink, logger: log.logger(label: "sinks.\(id)"), stats: stats)
        sink = try MQTTSinkPlugin.makeSink(configuration, context: context)
        buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: MQTTSinkPlugin.isDurable(configuration), stats: stats)
    }

    /// Runs the sink while `feed` sends positions; closes the input after `feed` and waits for the sink to end.
    func run(_ feed: @Sendable @escaping (SinkBuffer) async throws -> Void) async throws {
        let sink = self.sink, buffer = self.buffer
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await sink.run(input: buffer) }
            try await feed(buffer)
            buffer.close()
            try await group.waitForAll()
        }
    }
}

/// Positions `<prefix><from>` … one second apart, on `devices` devices in turn.
func positions(_ range: Range<Int>, prefix: String = "t-", devices: Int = 1) -> [Position] {
    range.map { i in
        Position(time: Timestamp(milliseconds: 1_714_557_600_000 + Int64(i) * 1000), latitude: 31.2 + Double(i) * 1e-5,
                 longitude: 121.5 + Double(i) * 1e-5, altitude: 12.5, speed: 2.5, course: 90, mode: .threeD, quality: .gps,
                 satellites: 9, hdop: 0.9, horizontalError: 4.5, source: "rx", device: "dev\(i % devices)", id: "\(prefix)\(i)")
    }
}

/// The `id` of a JSON position payload.
func positionID(_ payload: String) -> String? {
    (try? JSONValue.parse(string: payload))?["id"]?.stringValue
}

