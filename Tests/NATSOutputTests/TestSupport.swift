import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import NATSOutput
import NATSClient
import Testing

/// The package root, found from this file's path.
let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Positions `<prefix><from>` … one second apart, over `devices` devices in turn.
func positions(_ range: Range<Int>, devices: Int = 5, prefix: String = "t-") -> [Position] {
    range.map { i in
        Position(time: Timestamp(milliseconds: 1_714_557_600_000 + Int64(i) * 1000), latitude: 31.2 + Double(i) * 1e-5,
                 longitude: 121.5 + Double(i) * 1e-5, altitude: 12.5, speed: 2.5, course: 90, mode: .threeD, quality: .gps,
                 satellites: 9, hdop: 0.9, horizontalError: 4.5, source: "rx", device: "dev\(i % devices)", id: "\(prefix)\(i)")
    }
}

/// A sink built from JSON options, running in this process and fed through a real `SinkBuffer`.
struct SinkHarness {
    let sink: any PositionSink
    let buffer: SinkBuffer
    let stats: ComponentStats
    let log: RecordingLogHandler

    init(_ json: String, environment: [String: String] = [:]) throws {
        let configuration = try PluginOptions.valid(NATSSinkPlugin.self, json, environment: environment)
        stats = ComponentStats(id: "up")
        log = RecordingLogHandler(minimumLevel: .info)
        let context = ComponentContext(id: "up", kind: .sink, logger: Logger(label: "sinks.up", handler: log), stats: stats)
        sink = try NATSSinkPlugin.makeSink(configuration, context: context)
        buffer = SinkBuffer(capacity: 10_000, policy: .block, durable: NATSSinkPlugin.isDurable(configuration), stats: stats)
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

/// Message ids in a stream, and how many times each appears.
func idCounts(_ messages: [NATSStoredMessage]) -> [String: Int] {
    var counts: [String: Int] = [:]
    for m in messages { counts[m.messageID ?? "<none>", default: 0] += 1 }
    return counts
}

/// How a stream's messages compare with the ids expected in it, in three numbers that print short.
struct Delivery: Equatable, CustomStringConvertible {
    /// Expected ids not in the stream.
    var missing = 0
    /// Extra copies of ids (a message stored twice counts 1).
    var duplicates = 0
    /// Messages whose id was not expected (or that have none).
    var unexpected = 0

    static let exact = Delivery()

    init() {}

    init(_ messages: [NATSStoredMessage], expected: some Sequence<String>) {
        let counts = idCounts(messages)
        let wanted = Set(expected)
        missing = wanted.filter { counts[$0] == nil }.count
        duplicates = counts.values.reduce(0) { $0 + max(0, $1 - 1) }
        unexpected = counts.filter { !wanted.contains($0.key) }.values.reduce(0, +)
    }

    var description: String { "missing \(missing), duplicates \(duplicates), unexpected \(unexpected)" }
}
