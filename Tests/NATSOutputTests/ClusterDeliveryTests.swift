import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GatewayCore
import GatewayTesting
import NATSClient
import NATSTesting
@testable import NATSOutput
import Testing

/// The sink against a real 3-node JetStream cluster with an R3 stream on `locgate.>`.
/// Serialized: each test runs its own cluster, and three at once would starve a 2-core machine.
@Suite(.serialized) struct ClusterDeliveryTests {
    static func sinkJSON(_ cluster: NATSCluster, queue: String, extra: String = "") -> String {
        let servers = cluster.urls.map { "\"\($0)\"" }.joined(separator: ", ")
        return #"{ "servers": [\#(servers)], "subject": "locgate.positions.{device}", "expect_stream": "LOCGATE", "queue": \#(queue)\#(extra) }"#
    }

    @Test(.timeLimit(.minutes(3)))
    func everyPositionIsStoredOnceAndAReSendIsDroppedAsADuplicate() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"])
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = ClusterDeliveryTests.sinkJSON(cluster, queue: #"{ "path": "\#(dir)/outbox.sqlite" }"#)
        let sent = positions(0..<5000, devices: 5)

        let first = try Harness(json)
        try await first.run { buffer in
            for chunk in stride(from: 0, to: sent.count, by: 250) { await buffer.send(Array(sent[chunk..<min(chunk + 250, sent.count)])) }
        }
        var stored = try await cluster.messages("LOCGATE")
        #expect(stored.count == 5000)
        #expect(Delivery(stored, expected: sent.map(\.id)) == .exact)
        #expect(first.stats.value("nats.sent") == 5000)
        // The subject comes from the template, the body is the position's JSON.
        let byID = Dictionary(uniqueKeysWithValues: stored.map { ($0.messageID ?? "", $0) })
        #expect(byID["t-7"]?.subject == "locgate.positions.dev2")
        let body = try JSONValue.parse(byID["t-7"]?.payload ?? [])
        #expect(body["id"]?.stringValue == "t-7")
        #expect(body["device"]?.stringValue == "dev2")

        // The same positions again (what a restart after a crash re-sends): the duplicate window drops them all.
        let second = try Harness(json)
        try await second.run { buffer in await buffer.send(Array(sent.prefix(1000))) }
        stored = try await cluster.messages("LOCGATE")
        #expect(stored.count == 5000)
        #expect(second.stats.value("nats.duplicates") == 1000)
        #expect(second.stats.value("nats.sent") == 1000)
    }

    @Test(.timeLimit(.minutes(4)))
    func killingOneNodeMidRunLosesNothingAndDuplicatesNothing() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"])
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let harness = try Harness(ClusterDeliveryTests.sinkJSON(cluster, queue: #"{ "path": "\#(dir)/outbox.sqlite" }"#,
                                                                     extra: #", "ack_timeout": "2s", "reconnect": { "initial": "50ms", "max": "500ms" }"#))
        let total = 20_000
        let sent = positions(0..<total, devices: 5)
        let stats = harness.stats
        try await harness.run { buffer in
            // First half, then kill -9 the node this sink is connected to once a part is stored.
            for chunk in stride(from: 0, to: total / 2, by: 200) { await buffer.send(Array(sent[chunk..<chunk + 200])) }
            let someSent = await Poll.until(timeout: .seconds(60)) { stats.value("nats.sent") >= 2000 }
            #expect(someSent)
            let victim = try await ClusterDeliveryTests.nodeServing(connectionNamed: "locgate up", in: cluster)
            cluster.kill9(victim)
            for chunk in stride(from: total / 2, to: total, by: 200) { await buffer.send(Array(sent[chunk..<chunk + 200])) }
            let reconnected = await Poll.until(timeout: .seconds(60)) { stats.value("nats.reconnects") >= 1 }
            #expect(reconnected)
            try await cluster.restart(victim)
        }
        let stored = try await cluster.messages("LOCGATE")
        if stored.count != total {
            // Seen once in about 40 runs (10,000 of 20,000 stored) and not yet explained: say which
            // positions are missing, what each node reports, and whether a later read finds them
            // (a read too early) or not (a loss).
            let have = Set(stored.compactMap(\.messageID))
            let missing = sent.indices.filter { !have.contains(sent[$0].id) }
            print("cluster delivery: \(stored.count) stored, \(missing.count) missing (indices \(missing.first ?? -1)…\(missing.last ?? -1)), "
                  + "sequences \(stored.first?.sequence ?? 0)…\(stored.last?.sequence ?? 0); sent \(stats.value("nats.sent")), "
                  + "duplicates \(stats.value("nats.duplicates")), reconnects \(stats.value("nats.reconnects"))")
            for i in 0..<3 { print("cluster delivery: node \(i) /jsz: \((try? await cluster.jsz(i, query: "?streams=true"))?.jsonText ?? "none")") }
            try await Task.sleep(for: .seconds(5))  // a second look after a pause, only on failure
            print("cluster delivery: \(try await cluster.messages("LOCGATE").count) stored 5 s later")
            print("cluster delivery: the sink's log:\n\(harness.logText)")
        }
        #expect(stored.count == total)
        #expect(Delivery(stored, expected: sent.map(\.id)) == .exact)
        #expect(stats.value("nats.disconnects") >= 1)
    }

    @Test(.timeLimit(.minutes(2)))
    func aStreamThatDoesNotCaptureTheSubjectStopsTheSinkAtStart() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        try await cluster.createStream("OTHER", subjects: ["other.>"], replicas: 1)
        let servers = cluster.urls.map { "\"\($0)\"" }.joined(separator: ", ")

        let wrong = try Harness(#"{ "servers": [\#(servers)], "expect_stream": "OTHER", "queue": null }"#)
        do {
            try await wrong.run { buffer in await buffer.send(positions(0..<3, devices: 5)) }
            Issue.record("a stream that does not capture the subject started")
        } catch let error as NATSSinkError {
            #expect(error.message == "expect_stream: stream OTHER captures other.>, not the subject locgate.positions.{device} (published as locgate.positions.*)")
        }

        let missing = try Harness(#"{ "servers": [\#(servers)], "expect_stream": "NOPE", "queue": null }"#)
        do {
            // Queued positions keep the sink waiting for the check: it cannot end before it.
            try await missing.run { buffer in await buffer.send(positions(0..<3, devices: 5)) }
            Issue.record("a missing expect_stream started")
        } catch let error as NATSSinkError {
            #expect(error.message.hasPrefix("expect_stream: stream NOPE does not exist"))
        }
        // Nothing was published to the other stream.
        #expect(try await cluster.messages("OTHER").isEmpty)
    }

    @Test(.timeLimit(.minutes(2)))
    func theStreamOptionCreatesAMissingStreamAndNeverAltersAnExistingOne() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        let servers = cluster.urls.map { "\"\($0)\"" }.joined(separator: ", ")
        let create = try Harness(#"""
            { "servers": [\#(servers)], "subject": "fleet.{device}", "queue": null,
              "stream": { "name": "FLEET", "replicas": 3, "duplicate_window": "5m" } }
            """#)
        try await create.run { buffer in await buffer.send(positions(0..<10, devices: 5)) }
        let c = try await cluster.connect()
        let info = try #require(try await c.streamInfo("FLEET"))
        #expect(info.subjects == ["fleet.*"])
        #expect(info.replicas == 3)
        #expect(info.duplicateWindow == .seconds(300))
        #expect(info.messages == 10)

        let other = try Harness(#"""
            { "servers": [\#(servers)], "subject": "fleet.{device}", "queue": null,
              "stream": { "name": "FLEET", "replicas": 1, "duplicate_window": "1m" } }
            """#)
        try await other.run { buffer in await buffer.send(positions(10..<12, devices: 5)) }
        let after = try #require(try await c.streamInfo("FLEET"))
        #expect(after.replicas == 3)
        #expect(after.duplicateWindow == .seconds(300))
        #expect(after.messages == 12)
        #expect(other.log.entries.contains { $0.level == .warning && $0.message.contains("exists with other settings") })
        await c.close()
    }

    @Test(.timeLimit(.minutes(2)))
    func coreNATSPublishesAreAcceptedOnFlush() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        // A stream listening on the subject is the test's subscriber: core publishes land in it too.
        try await cluster.createStream("CORE", subjects: ["core.>"], replicas: 1)
        let servers = cluster.urls.map { "\"\($0)\"" }.joined(separator: ", ")
        let harness = try Harness(#"{ "servers": [\#(servers)], "subject": "core.{device}", "jetstream": false, "queue": null }"#)
        try await harness.run { buffer in await buffer.send(positions(0..<500, devices: 5)) }
        #expect(harness.stats.value("nats.sent") == 500)
        let arrived = await Poll.until { (try? await cluster.messages("CORE").count) == 500 }
        #expect(arrived)
        // Core messages carry no id header: nothing for a stream to deduplicate with.
        #expect(try await cluster.messages("CORE").allSatisfy { $0.messageID == nil })
    }

    /// The index of the node that has a client connection named `name` (from its /connz report).
    static func nodeServing(connectionNamed name: String, in cluster: NATSCluster) async throws -> Int {
        for i in cluster.nodes.indices {
            let url = URL(string: "http://127.0.0.1:\(cluster.nodes[i].httpPort)/connz")!
            let (data, _) = try await URLSession.shared.data(from: url)
            let report = try JSONValue.parse(Array(data))
            if report["connections"]?.arrayValue?.contains(where: { $0["name"]?.stringValue == name }) == true { return i }
        }
        throw ClusterError("no node serves a connection named \(name)")
    }
}

/// Credentials against a real server that requires them.
@Suite(.serialized) struct AuthenticationTests {
    @Test(.timeLimit(.minutes(2)))
    func theRightTokenDeliversAndAWrongOneIsLoggedAndRetried() async throws {
        let server = try NATSCluster(size: 1, extraConfig: #"authorization { token: "s3cret" }"#, credentials: .token("s3cret"))
        defer { server.stop() }
        try await server.start()
        try await server.createStream("LOCGATE", subjects: ["locgate.>"], replicas: 1)
        let url = server.urls[0]

        let good = try Harness(#"{ "servers": ["\#(url)"], "token": "${T}", "expect_stream": "LOCGATE", "queue": null }"#, environment: ["T": "s3cret"])
        try await good.run { buffer in await buffer.send(positions(0..<50, devices: 5)) }
        #expect(Delivery(try await server.messages("LOCGATE"), expected: positions(0..<50, devices: 5).map(\.id)) == .exact)

        let bad = try Harness(#"{ "servers": ["\#(url)"], "token": "wrong", "queue": null, "reconnect": { "initial": "20ms", "max": "50ms" } }"#)
        let log = bad.log
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await bad.sink.run(input: bad.buffer) }
            await bad.buffer.send(positions(50..<60, devices: 5))
            // libnats gives up on a server that refuses the same credentials twice (and during the
            // first connect it keeps the server's reason to itself); the sink logs the closing as
            // an error and connects again, so credentials fixed on the server side are picked up.
            let retried = await Poll.until {
                log.entries.contains { $0.level == .error && $0.message.hasPrefix("the client closed the connection") }
                    && log.entries.filter { $0.message.hasPrefix("connecting again in") }.count >= 2
            }
            #expect(retried, "\(log.entries)")
            group.cancelAll()
        }
        // Nothing got through with the wrong token.
        #expect(try await server.count("LOCGATE") == 50)
    }
}
