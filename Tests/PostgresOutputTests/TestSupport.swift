import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import PostgresOutput
import Testing

/// Positions `<prefix><from>` … one second apart, over `devices` devices in turn, near Shanghai.
func positions(_ range: Range<Int>, devices: Int = 5, prefix: String = "t-", datum: Datum = .wgs84) -> [Position] {
    range.map { i in
        Position(time: Timestamp(milliseconds: 1_714_557_600_000 + Int64(i) * 1000), latitude: 31.2 + Double(i) * 1e-5,
                 longitude: 121.5 + Double(i) * 1e-5, altitude: 12.5, speed: 2.5, course: 90, mode: .threeD, quality: .gps,
                 satellites: 9, hdop: 0.9, horizontalError: 4.5, datum: datum, source: "rx", device: "dev\(i % devices)", id: "\(prefix)\(i)")
    }
}

/// A sink built from JSON options, running in this process and fed through a real `SinkBuffer`.
struct SinkHarness {
    let sink: any PositionSink
    let buffer: SinkBuffer
    let stats: ComponentStats
    let log: RecordingLogHandler

    init(_ json: String, environment: [String: String] = [:]) throws {
        let configuration = try PluginOptions.valid(PostgresSinkPlugin.self, json, environment: environment)
        stats = ComponentStats(id: "db")
        log = RecordingLogHandler(minimumLevel: .debug)
        let context = ComponentContext(id: "db", kind: .sink, logger: Logger(label: "sinks.db", handler: log), stats: stats)
        sink = try PostgresSinkPlugin.makeSink(configuration, context: context)
        buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: PostgresSinkPlugin.isDurable(configuration), stats: stats)
    }

    /// Runs the sink while `feed` sends positions; closes the input after `feed` and waits for the sink to end.
    func run(_ feed: @Sendable @escaping (SinkBuffer) async throws -> Void = { _ in }) async throws {
        let sink = self.sink, buffer = self.buffer
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await sink.run(input: buffer) }
            try await feed(buffer)
            buffer.close()
            try await group.waitForAll()
        }
    }

    /// The log so far, one line each.
    var logText: String { log.entries.map(\.description).joined(separator: "\n") }
}

/// `{"type": "postgres", …}` for `server`'s database `database`, a queue file in `directory` (or
/// null), and `extra` members.
func sinkJSON(_ server: PostgresServer, database: String, queue: String?, extra: String = "") -> String {
    let q = queue.map { #"{ "path": "\#($0)" }"# } ?? "null"
    return #"{ "type": "postgres", "url": "\#(server.url(database: database))", "batch": { "max_positions": 100, "interval": "50ms" }, "retry": { "initial": "50ms", "max": "500ms" }, "queue": \#(q)\#(extra.isEmpty ? "" : ", " + extra) }"#
}

/// Integers from the first column of psql's output.
func numbers(_ text: String) -> [Int] { text.split(separator: "\n").compactMap { Int($0) } }
