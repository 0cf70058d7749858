import Foundation
import GatewayCore
import GatewayTesting
import NATSTesting
@testable import NATSOutput
import Testing

/// The sink contract (``SinkConformance``) for the nats sink: against a real JetStream server,
/// and with its durable queue while the server is down.
@Suite(.timeLimit(.minutes(3)), .serialized) struct NATSSinkConformanceTests {
    static func make(_ json: String) -> (ComponentContext) throws -> any PositionSink {
        { context in try NATSSinkPlugin.makeSink(try PluginOptions.valid(NATSSinkPlugin.self, json, path: "sinks.up"), context: context) }
    }

    static func options(servers: [String], queue: String?) -> String {
        let q = queue.map { #"{ "path": "\#($0)" }"# } ?? "null"
        let list = servers.map { "\"\($0)\"" }.joined(separator: ", ")
        return #"{ "servers": [\#(list)], "subject": "locgate.positions.{device}", "reconnect": { "initial": "20ms", "max": "200ms" }, "queue": \#(q) }"#
    }

    /// A loopback server URL where nothing listens: the server is down.
    static var downURL: String { "nats://127.0.0.1:\(LoopbackTCPServer.freePort())" }

    @Test func everyPositionIsStoredAndCounted() async throws {
        let server = try NATSCluster(size: 1)
        defer { server.stop() }
        try await server.start()
        try await server.createStream("LOCGATE", subjects: ["locgate.>"], replicas: 1)
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkDeliversAndCounts(positions(0..<250, devices: 5), make: Self.make(Self.options(servers: server.urls, queue: dir + "/q.sqlite"))) {
            try await server.messages("LOCGATE").compactMap(\.messageID)
        }
    }

    @Test func withAQueueABatchIsAcknowledgedOnlyOnceItIsInTheQueueFile() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkAcknowledgesOnlyAfterCommit(positions(0..<100), make: Self.make(Self.options(servers: [Self.downURL], queue: dir + "/q.sqlite"))) {
            QueueFile.pendingIDs(dir + "/q.sqlite")
        }
    }

    @Test func itStopsWhenCancelledWhileTheServerIsDown() async throws {
        try await SinkConformance.checkCancellation(positions(0..<10), make: Self.make(Self.options(servers: [Self.downURL], queue: nil)))
    }

    @Test func withAQueueAStopRequestEndsItWhileTheServerIsDown() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkStopRequest(positions(0..<10), make: Self.make(Self.options(servers: [Self.downURL], queue: dir + "/q.sqlite")))
        #expect(QueueFile.pendingIDs(dir + "/q.sqlite") == Set(positions(0..<10).map(\.id)))
    }
}
