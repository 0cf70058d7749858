import Foundation
import GatewayCore
import GatewayTesting
import MQTTTesting
@testable import MQTTOutput
import Testing

/// The sink contract (``SinkConformance``) for the mqtt sink: against a real mosquitto, and with
/// its durable queue while the broker is down.
@Suite(.timeLimit(.minutes(3)), .serialized) struct MQTTSinkConformanceTests {
    static func make(_ json: String) -> (ComponentContext) throws -> any PositionSink {
        { context in try MQTTSinkPlugin.makeSink(try configuration(json), context: context) }
    }

    static func options(url: String, user: String = "gw1", password: String = "s3cret-pw", queue: String?) -> String {
        let q = queue.map { #"{ "path": "\#($0)", "synchronous": "normal" }"# } ?? "null"
        return #"{ "url": "\#(url)", "username": "\#(user)", "password": "\#(password)", "client_id": "conformance-\#(UUID().uuidString.prefix(8))", "topic": "locgate/{device}", "reconnect_max": "1s", "queue": \#(q) }"#
    }

    /// A loopback broker URL where nothing listens: the broker is down.
    static var downURL: String { "mqtt://127.0.0.1:\(LoopbackTCPServer.freePort())" }

    @Test func everyPositionIsPublishedAndCounted() async throws {
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let subscriber = try await Subscriber(broker: broker, topic: "locgate/#")
        let sent = positions(0..<250, devices: 3)
        try await SinkConformance.checkDeliversAndCounts(sent, make: Self.make(Self.options(url: broker.url, user: broker.user, password: broker.password, queue: dir + "/q.sqlite"))) {
            // The sink returned once the broker acknowledged everything; the subscriber may still be reading.
            _ = await Poll.until(timeout: .seconds(30)) { subscriber.messages().count >= sent.count }
            return subscriber.messages().compactMap { positionID($0.payload) }
        }
    }

    @Test func withAQueueABatchIsAcknowledgedOnlyOnceItIsInTheQueueFile() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkAcknowledgesOnlyAfterCommit(positions(0..<100), make: Self.make(Self.options(url: Self.downURL, queue: dir + "/q.sqlite"))) {
            QueueFile.pendingIDs(dir + "/q.sqlite")
        }
    }

    @Test func itStopsWhenCancelledWhileTheBrokerIsDown() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkCancellation(positions(0..<10), make: Self.make(Self.options(url: Self.downURL, queue: dir + "/q.sqlite")))
    }

    @Test func withAQueueAStopRequestEndsItWhileTheBrokerIsDown() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkStopRequest(positions(0..<10), make: Self.make(Self.options(url: Self.downURL, queue: dir + "/q.sqlite")))
        #expect(QueueFile.pendingIDs(dir + "/q.sqlite") == Set(positions(0..<10).map(\.id)))
    }
}
