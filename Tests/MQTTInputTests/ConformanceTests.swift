import Foundation
import GatewayCore
import GatewayTesting
import MQTTInput
import MQTTTesting
import Testing

/// The source contract (``SourceConformance``) for the mqtt source, against a real mosquitto.
@Suite(.serialized) struct MQTTSourceConformanceTests {
    static func options(url: String, clientID: String) -> String {
        #"{ "url": "\#(url)", "username": "gw1", "password": "s3cret-pw", "client_id": "\#(clientID)", "topics": ["owntracks/+/+"], "format": "owntracks", "reconnect_max": "500ms" }"#
    }

    static func make(_ json: String) -> (ComponentContext) throws -> any PositionSource {
        { context in try MQTTSourcePlugin.makeSource(try configuration(json), context: context) }
    }

    /// Publishes one OwnTracks location every 200 ms (a new second each) until cancelled; a
    /// publish that fails while the broker is down is tried again with the next one.
    static func publishing(_ broker: MosquittoBroker) async {
        var tst = 1_714_557_600
        while !Task.isCancelled {
            let payload = ownTracks(tst: tst, lat: 31.2, lon: 121.5)
            _ = try? await Program.onDispatchThread { try publish(broker, topic: "owntracks/alice/phone", [payload]) }
            tst += 1
            try? await Task.sleep(for: .milliseconds(200))
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func itStopsWhenCancelledWhileSubscribedAndWhileNoBrokerListens() async throws {
        let broker = try MosquittoBroker()
        try await SourceConformance.checkCancellation(make: Self.make(Self.options(url: broker.url, clientID: "conf-\(UUID().uuidString.prefix(8))")))
        try await SourceConformance.checkCancellation(
            make: Self.make(Self.options(url: "mqtt://127.0.0.1:\(LoopbackTCPServer.freePort())", clientID: "conf-\(UUID().uuidString.prefix(8))")))
    }

    @Test(.timeLimit(.minutes(2)))
    func badMessagesAreCountedAndSkipped() async throws {
        let broker = try MosquittoBroker()
        let clientID = "conf-\(UUID().uuidString.prefix(8))"
        let stats = try await SourceConformance.checkBadInputCounted(counters: ["mqtt.skipped.malformed"], feedGarbage: {
            // Once the broker has the source's subscription, so the messages reach it.
            guard await Poll.until(timeout: .seconds(20), { broker.log().contains("\(clientID) 1 owntracks/+/+") }) else {
                throw PeerError(description: "the source did not subscribe: \(broker.log())")
            }
            try await Program.onDispatchThread { try publish(broker, topic: "owntracks/alice/phone", ["not json", #"{"_type":"location"}"#]) }
        }, make: Self.make(Self.options(url: broker.url, clientID: clientID)))
        #expect(stats.value("mqtt.skipped.malformed") > 0)
    }

    @Test(.timeLimit(.minutes(3)))
    func itRejoinsARestartedBroker() async throws {
        let broker = try MosquittoBroker()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await Self.publishing(broker) }
            try await SourceConformance.checkReconnects(
                peerDown: { broker.stop() },
                peerUp: { try await Program.onDispatchThread { try broker.start() } },
                make: Self.make(Self.options(url: broker.url, clientID: "conf-\(UUID().uuidString.prefix(8))")))
            group.cancelAll()
        }
    }
}
