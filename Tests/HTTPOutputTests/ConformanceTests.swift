import Foundation
import GatewayCore
@testable import HTTPOutput
import GatewayTesting
import Testing

/// The sink contract (``SinkConformance``) for the http sink: against the receiver script, and
/// with its durable queue while the server is down.
@Suite(.timeLimit(.minutes(3))) struct HTTPSinkConformanceTests {
    static func make(_ json: String) -> (ComponentContext) throws -> any PositionSink {
        { context in try HTTPSinkPlugin.makeSink(try configuration(json), context: context) }
    }

    static func options(url: String, queue: String?) -> String {
        let q = queue.map { #"{"path":"\#($0)"}"# } ?? "null"
        return #"{"url":"\#(url)","batch":{"max_positions":20,"interval":"50ms"},"retry":{"initial":"20ms","max":"200ms"},"queue":\#(q)}"#
    }

    /// A loopback URL where nothing listens: the server is down.
    static var downURL: String { "http://127.0.0.1:\(LoopbackTCPServer.freePort())/track" }

    @Test func everyPositionIsDeliveredAndCounted() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        try await SinkConformance.checkDeliversAndCounts(positions(0..<250), make: Self.make(Self.options(url: receiver.url, queue: dir + "/q.sqlite"))) {
            receiver.accepted().flatMap(\.ids)
        }
    }

    @Test func withoutAQueueABatchIsAcknowledgedOnlyOnceTheServerTookIt() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Receiver(directory: dir)
        defer { receiver.stop() }
        try await SinkConformance.checkAcknowledgesOnlyAfterCommit(positions(0..<100), make: Self.make(Self.options(url: receiver.url, queue: nil))) {
            Set(receiver.accepted().flatMap(\.ids))
        }
    }

    @Test func withAQueueABatchIsAcknowledgedOnlyOnceItIsInTheQueueFile() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkAcknowledgesOnlyAfterCommit(positions(0..<100), make: Self.make(Self.options(url: Self.downURL, queue: dir + "/q.sqlite"))) {
            QueueFile.pendingIDs(dir + "/q.sqlite")
        }
    }

    @Test func itStopsWhenCancelledWhileTheServerIsDown() async throws {
        try await SinkConformance.checkCancellation(positions(0..<10), make: Self.make(Self.options(url: Self.downURL, queue: nil)))
    }

    @Test func withAQueueAStopRequestEndsItWhileTheServerIsDown() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkStopRequest(positions(0..<10), make: Self.make(Self.options(url: Self.downURL, queue: dir + "/q.sqlite")))
        #expect(QueueFile.pendingIDs(dir + "/q.sqlite") == Set(positions(0..<10).map(\.id)))
    }
}
