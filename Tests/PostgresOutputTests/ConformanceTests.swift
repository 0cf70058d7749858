import Foundation
import GatewayCore
import GatewayTesting
@testable import PostgresOutput
import Testing

/// The sink contract (``SinkConformance``) for the postgres sink: against a real PostgreSQL, and
/// with its durable queue while the server is down.
@Suite(.serialized) struct PostgresSinkConformanceTests {
    static func make(_ json: String) -> (ComponentContext) throws -> any PositionSink {
        { context in try PostgresSinkPlugin.makeSink(try PluginOptions.valid(PostgresSinkPlugin.self, json, path: "sinks.db"), context: context) }
    }

    /// Options for a server on a loopback port where nothing listens: PostgreSQL is down.
    static func downJSON(queue: String?) -> String {
        let q = queue.map { #"{ "path": "\#($0)" }"# } ?? "null"
        return #"{ "url": "postgresql://locgate@127.0.0.1:\#(LoopbackTCPServer.freePort())/tracks", "connect_timeout": "1s", "retry": { "initial": "50ms", "max": "200ms" }, "queue": \#(q) }"#
    }

    @Test(.timeLimit(.minutes(1)))
    func everyPositionIsStoredAndCounted() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkDeliversAndCounts(positions(0..<250, devices: 5), make: Self.make(sinkJSON(server, database: "tracks", queue: dir + "/q.sqlite"))) {
            try await Program.onDispatchThread { try server.psql("SELECT id FROM positions", database: "tracks") }.split(separator: "\n").map(String.init)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func withAQueueABatchIsAcknowledgedOnlyOnceItIsInTheQueueFile() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkAcknowledgesOnlyAfterCommit(positions(0..<100), make: Self.make(Self.downJSON(queue: dir + "/q.sqlite"))) {
            QueueFile.pendingIDs(dir + "/q.sqlite")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func itStopsWhenCancelledWhileTheServerIsDown() async throws {
        try await SinkConformance.checkCancellation(positions(0..<10), make: Self.make(Self.downJSON(queue: nil)))
    }

    @Test(.timeLimit(.minutes(1)))
    func withAQueueAStopRequestEndsItWhileTheServerIsDown() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkStopRequest(positions(0..<10), make: Self.make(Self.downJSON(queue: dir + "/q.sqlite")))
        #expect(QueueFile.pendingIDs(dir + "/q.sqlite") == Set(positions(0..<10).map(\.id)))
    }
}
