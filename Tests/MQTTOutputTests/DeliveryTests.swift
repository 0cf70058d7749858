import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
import Locking
import MQTTTesting
@testable import MQTTOutput
import Testing

/// The sink in process against a real mosquitto on loopback.
@Suite(.serialized) struct DeliveryTests {
    static func config(_ broker: MosquittoBroker, _ dir: String, extra: String = "") throws -> MQTTSinkConfiguration {
        try configuration("""
            { "url": "\(broker.url)", "username": "\(broker.user)", "password": "\(broker.password)", "client_id": "test-\(UUID().uuidString.prefix(8))",
              "topic": "locgate/{device}", "reconnect_max": "1s", "queue": { "path": "\(dir)/q.sqlite", "synchronous": "normal" } \(extra) }
            """)
    }

    @Test(.timeLimit(.minutes(2)), arguments: [(1, "5"), (2, "5"), (1, "3.1.1"), (0, "5")])
    func everyIDArrives(qos: Int, version: String) async throws {
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let subscriber = try await Subscriber(broker: broker, topic: "locgate/#")
        let c = try Self.config(broker, dir, extra: #", "qos": \#(qos), "protocol": "\#(version)", "status": { "topic": "gw/status" }"#)
        let harness = try Harness(c)
        let n = 3000
        try await harness.run { buffer in
            for start in stride(from: 0, to: n, by: 100) { await buffer.send(positions(start..<(start + 100), devices: 3)) }
        }
        // The sink returned: everything was acknowledged (or, at QoS 0, written) and the queue is empty.
        #expect(harness.stats.value("queue.depth") == 0)
        #expect(await Poll.until(timeout: .seconds(30)) { subscriber.messages().count >= n })
        let messages = subscriber.messages()
        #expect(Set(messages.compactMap { positionID($0.payload) }) == Set((0..<n).map { "t-\($0)" }))
        #expect(messages.allSatisfy { $0.topic == "locgate/dev\(positionID($0.payload).flatMap { Int($0.dropFirst(2)) }.map { $0 % 3 } ?? -1)" })
        #expect(harness.log.entries(level: .info, containing: "connected to \(broker.url)").count >= 1)
        // A clean exit leaves the status offline (retained).
        let status = try await Subscriber(broker: broker, topic: "gw/status")
        #expect(await Poll.until(timeout: .seconds(10)) { status.messages().map(\.payload) == ["offline"] })
    }

    @Test(.timeLimit(.minutes(3)))
    func aBrokerReceiveMaximumBelowMaxInflightStillGetsEveryID() async throws {
        // mosquitto advertises max_inflight_messages as its MQTT 5 receive maximum: the connection
        // hands libmosquitto no more unacknowledged messages than that (max_inflight is 100).
        let broker = try MosquittoBroker(maxInflightMessages: 3)
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let subscriber = try await Subscriber(broker: broker, topic: "locgate/#")
        let harness = try Harness(try Self.config(broker, dir, extra: #", "status": { "topic": "gw/status" }"#))
        let n = 1000
        try await harness.run { buffer in
            for start in stride(from: 0, to: n, by: 100) { await buffer.send(positions(start..<(start + 100), devices: 2)) }
        }
        #expect(harness.stats.value("queue.depth") == 0)
        #expect(await Poll.until(timeout: .seconds(30)) { subscriber.messages().count >= n })
        #expect(Set(subscriber.messages().compactMap { positionID($0.payload) }) == Set((0..<n).map { "t-\($0)" }))
        #expect(harness.log.entries(level: .info, containing: "the broker's receive maximum 3 lowers max_inflight 100").count >= 1)
    }

    @Test(.timeLimit(.minutes(3)))
    func brokerStoppedMidRunAndRestartedLosesNothing() async throws {
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A persistent session: what is published while the subscriber reconnects waits for it.
        let subscriber = try await Subscriber(broker: broker, topic: "locgate/#", persistent: true)
        let harness = try Harness(try Self.config(broker, dir))
        let n = 3000
        try await harness.run { buffer in
            await buffer.send(positions(0..<1000, devices: 4))
            #expect(await Poll.until(timeout: .seconds(30)) { subscriber.messages().count >= 500 })
            broker.stop(graceful: true)
            #expect(await Poll.until(timeout: .seconds(30)) { !harness.log.entries(containing: "retrying in").isEmpty })
            // Positions keep arriving during the outage: they are committed and wait.
            await buffer.send(positions(1000..<2000, devices: 4))
            // The outage itself is the behaviour under test: several reconnect attempts fail.
            #expect(await Poll.until(timeout: .seconds(30)) { harness.log.entries(containing: "cannot connect").count >= 2 })
            try broker.start()
            await buffer.send(positions(2000..<n, devices: 4))
        }
        #expect(await Poll.until(timeout: .seconds(60)) { Set(subscriber.messages().compactMap { positionID($0.payload) }).count >= n })
        #expect(Set(subscriber.messages().compactMap { positionID($0.payload) }) == Set((0..<n).map { "t-\($0)" }))
        #expect(harness.stats.value("mqtt.disconnects") >= 1)
    }

    @Test(.timeLimit(.minutes(2)))
    func lateSubscriberGetsTheNewestFixPerDeviceRetained() async throws {
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The broker is down while the first positions arrive: a backlog of 4 devices builds up.
        broker.stop()
        let harness = try Harness(try Self.config(broker, dir, extra: #", "retain": "last""#))
        let watcher = ManagedFlag()
        try await harness.run { buffer in
            await buffer.send(positions(0..<400, devices: 4))
            try broker.start()
            // Everyone who subscribes while the backlog drains must never be told an old fix is current:
            // each retained message a fresh subscriber sees is the newest of its device.
            #expect(await Poll.until(timeout: .seconds(30)) { harness.stats.value("queue.depth") == 0 })
            watcher.set()
            await buffer.send(positions(400..<800, devices: 4))
        }
        #expect(watcher.isSet)
        let late = try await Subscriber(broker: broker, topic: "locgate/#", extra: ["--retained-only"])
        #expect(await Poll.until(timeout: .seconds(10)) { late.messages().count >= 4 })
        let retained = Dictionary(late.messages().map { ($0.topic, positionID($0.payload) ?? "") }, uniquingKeysWith: { a, _ in a })
        #expect(retained == ["locgate/dev0": "t-796", "locgate/dev1": "t-797", "locgate/dev2": "t-798", "locgate/dev3": "t-799"])
        #expect(late.messages().count == 4)
    }

    @Test(.timeLimit(.minutes(2)))
    func retainLastNeverRetainsABacklogFix() async throws {
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        broker.stop()
        let harness = try Harness(try Self.config(broker, dir, extra: #", "retain": "last""#))
        try await harness.run { buffer in
            await buffer.send(positions(0..<200, devices: 2))
            try broker.start()
        }
        // Checked in the broker's view: a subscriber that sees retained flags (-R excluded) gets only the newest two.
        let late = try await Subscriber(broker: broker, topic: "locgate/#", extra: ["--retained-only"])
        #expect(await Poll.until(timeout: .seconds(10)) { late.messages().count >= 2 })
        #expect(Set(late.messages().compactMap { positionID($0.payload) }) == ["t-198", "t-199"])
    }

    @Test(.timeLimit(.minutes(2)))
    func wrongPasswordIsAClearErrorRetriedAndNothingIsLost() async throws {
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let subscriber = try await Subscriber(broker: broker, topic: "locgate/#")
        var c = try Self.config(broker, dir)
        c.broker.username = "gw2"
        c.broker.password = "not-yet-valid"
        let harness = try Harness(c)
        try await harness.run { buffer in
            await buffer.send(positions(0..<300))
            #expect(await Poll.until(timeout: .seconds(30)) { harness.log.entries(level: .error, containing: "Not authorized").count >= 2 }, "\(harness.log.entries.suffix(5))")
            try broker.addUser("gw2", password: "not-yet-valid")
        }
        let errors = harness.log.entries(level: .error, containing: "cannot connect to \(broker.url)")
        #expect(errors.first?.message.contains("retrying in") == true, "\(errors)")
        #expect(await Poll.until(timeout: .seconds(30)) { subscriber.messages().count >= 300 })
        #expect(Set(subscriber.messages().compactMap { positionID($0.payload) }) == Set((0..<300).map { "t-\($0)" }))
    }

    @Test(.timeLimit(.minutes(2)))
    func untrustedCertificateIsAClearErrorRetriedAndNothingIsLost() async throws {
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try broker.presentCertificate(trusted: false)
        // Persistent: the broker restarts to change its certificate, and a clean-session subscriber
        // would miss what the sink publishes before it has subscribed again.
        let subscriber = try await Subscriber(broker: broker, topic: "locgate/#", persistent: true)
        let c = try configuration("""
            { "url": "\(broker.tlsURL)", "topic": "locgate/{device}", "reconnect_max": "1s",
              "tls": { "ca_file": "\(broker.caFile)", "cert_file": "\(broker.clientCert)", "key_file": "\(broker.clientKey)" },
              "queue": { "path": "\(dir)/q.sqlite" } }
            """)
        let harness = try Harness(c)
        try await harness.run { buffer in
            await buffer.send(positions(0..<300))
            #expect(await Poll.until(timeout: .seconds(30)) { harness.log.entries(level: .error, containing: "certificate verify failed").count >= 2 })
            try broker.presentCertificate(trusted: true)
        }
        #expect(await Poll.until(timeout: .seconds(30)) { subscriber.messages().count >= 300 })
        #expect(Set(subscriber.messages().compactMap { positionID($0.payload) }) == Set((0..<300).map { "t-\($0)" }))
        #expect(harness.log.entries(level: .info, containing: "connected to \(broker.tlsURL)").count >= 1)
    }
}

/// A flag one task sets and another reads.
final class ManagedFlag: Sendable {
    private let value = Locked(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
