import Foundation
import GatewayCore
import GatewayTesting
import Locking
import NATSClient
@testable import NATSInput
import NATSTesting
import PositionEncoding
import Testing

/// Positions as a gateway's nats sink writes them: locgate JSON with id and device.
func positionJSON(_ i: Int, device: String = "van-\(0)") -> [UInt8] {
    let p = Position(time: Timestamp(milliseconds: 1_714_521_600_000 + Int64(i) * 1000), latitude: 31.2 + Double(i) * 1e-5,
                     longitude: 121.5, mode: .threeD, quality: .gps, source: "rx", device: device, id: "rx-\(i)")
    var out: [UInt8] = []
    PositionJSON.append(p, to: &out)
    return out
}

/// A source output that holds every acknowledgement until the test releases it: what a sink
/// that has not yet taken the positions over looks like to the source.
final class HeldAcks: Sendable {
    private let state = Locked<(positions: [Position], acks: [BatchAcknowledgement])>(([], []))

    var output: SourceOutput {
        SourceOutput(tracking: { [self] batch, ack in
            ack?.retain()
            state.withLock { s in
                s.positions += batch
                if let ack { s.acks.append(ack) }
            }
        })
    }

    var positions: [Position] { state.withLock { $0.positions } }

    func releaseAll() {
        let acks = state.withLock { s in defer { s.acks = [] }; return s.acks }
        for a in acks { a.release() }
    }
}

/// Runs a `nats` source in this process until `body` returns.
func withSource(_ json: String, output: SourceOutput, _ body: (ComponentStats) async throws -> Void) async throws {
    let c = try PluginOptions.valid(NATSSourcePlugin.self, json)
    let context = SourceConformance.makeContext(id: "bus")
    let source = try NATSSourcePlugin.makeSource(c, context: context)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await source.run(output: output) }
        defer { group.cancelAll() }
        try await body(context.stats)
        group.cancelAll()
        do { try await group.waitForAll() } catch is CancellationError {}
    }
}

@Suite(.serialized) struct ConsumeTests {
    @Test(.timeLimit(.minutes(3)))
    func messagesPublishedWhileStoppedArriveAndAreAckedOnlyOnceHandled() async throws {
        // max_payload lets the 10 MB message through to the source, which must refuse it.
        let cluster = try NATSCluster(size: 1, extraConfig: "max_payload: 16MB\nmax_pending: 64MB")
        defer { cluster.stop() }
        try await cluster.start()
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"], replicas: 1)
        let publisher = try await cluster.connect()
        for i in 0..<300 {
            let r = try await publisher.publishAndWait(subject: "locgate.positions.van-\(i % 3)", payload: positionJSON(i, device: "van-\(i % 3)"), messageID: "rx-\(i)", timeout: .seconds(5))
            guard case .stored = r else { Issue.record("publish \(i): \(r)"); return }
        }
        let config = #"{ "servers": [\#(cluster.urls.map { "\"\($0)\"" }.joined(separator: ", "))], "stream": "LOCGATE", "consumer": "agg", "batch": 50, "max_unacked": 200, "ack_wait": "60s" }"#

        // Run 1: the sink never takes them over; at most max_unacked are out, none acknowledged.
        let held = HeldAcks()
        try await withSource(config, output: held.output) { _ in
            #expect(await Poll.until { held.positions.count == 200 })
            let info = try await cluster.consumer("LOCGATE", "agg")
            #expect(info?.numAckPending == 200)
            // Released: acknowledged, and the rest follows.
            held.releaseAll()
            #expect(await Poll.until { held.releaseAll(); return held.positions.count == 300 })
            held.releaseAll()
            #expect(await Poll.until { (try? await cluster.consumer("LOCGATE", "agg"))?.numAckPending == 0 })
        }
        #expect(Set(held.positions.map(\.id)).count == 300)
        #expect(held.positions.first?.source == "bus")
        #expect(held.positions.first?.device == "van-0")

        // Stopped: more positions, a device only in the subject, and bad messages.
        for i in 300..<400 {
            _ = try await publisher.publishAndWait(subject: "locgate.positions.van-\(i % 3)", payload: positionJSON(i, device: "van-\(i % 3)"), messageID: "rx-\(i)", timeout: .seconds(5))
        }
        let noDevice = Array(#"{"class":"TPV","id":"x-1","time":"2024-05-01T01:00:00.000Z","lat":31.5,"lon":121.5,"mode":3}"#.utf8)
        let bad: [(String, [UInt8])] = [
            ("bad-json", Array("{not json".utf8)),
            ("no-coordinates", Array(#"{"class":"TPV","id":"x-2","time":"2024-05-01T01:00:00.000Z","mode":1}"#.utf8)),
            ("huge", [UInt8](repeating: UInt8(ascii: " "), count: 10 * 1024 * 1024)),
        ]
        _ = try await publisher.publishAndWait(subject: "locgate.positions.truck-9", payload: noDevice, messageID: "x-1", timeout: .seconds(5))
        for (id, payload) in bad {
            let r = try await publisher.publishAndWait(subject: "locgate.positions.bad", payload: payload, messageID: id, timeout: .seconds(20))
            guard case .stored = r else { Issue.record("publish \(id): \(r)"); return }
        }
        await publisher.close()

        // Run 2: only what came while stopped (the consumer kept its place); bad ones counted and terminated.
        let collector = PositionCollector()
        try await withSource(config, output: collector.output) { stats in
            #expect(await collector.waitForCount(101))
            #expect(await Poll.until { stats.value("nats.too_large") == 1 })
            #expect(stats.value("nats.bad_json") == 1)
            #expect(stats.value("nats.no_coordinates") == 1)
            #expect(await Poll.until {
                guard let info = try? await cluster.consumer("LOCGATE", "agg") else { return false }
                return info.numAckPending == 0 && info.numPending == 0
            })
        }
        #expect(collector.count == 101)
        #expect(collector.positions.first { $0.id == "x-1" }?.device == "truck-9")
        #expect(Set(collector.positions.map(\.id)) == Set((300..<400).map { "rx-\($0)" } + ["x-1"]))
    }

    @Test(.timeLimit(.minutes(3)))
    func redeliveriesOfHandledPositionsAreAckedAndDropped() async throws {
        let cluster = try NATSCluster(size: 1)
        defer { cluster.stop() }
        try await cluster.start()
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"], replicas: 1)
        let publisher = try await cluster.connect()
        for i in 0..<20 {
            _ = try await publisher.publishAndWait(subject: "locgate.positions.van-0", payload: positionJSON(i), messageID: "rx-\(i)", timeout: .seconds(5))
        }
        await publisher.close()
        // Positions handled, acks lost: the source's recent ids remember them when they come again.
        let recent = RecentIDs(capacity: 100)
        recent.insert((0..<20).map { "van-0\u{1F}rx-\($0)" })
        #expect(recent.contains("van-0\u{1F}rx-3"))
        let small = RecentIDs(capacity: 2)
        small.insert(["a", "b", "c"])
        #expect(!small.contains("a") && small.contains("b") && small.contains("c"))

        // A sink that never takes them over: after ack_wait they are delivered again, and
        // again emitted (they were never handled, so they are not duplicates).
        let held = HeldAcks()
        let config = #"{ "servers": [\#(cluster.urls.map { "\"\($0)\"" }.joined(separator: ", "))], "stream": "LOCGATE", "consumer": "agg", "ack_wait": "1s", "max_unacked": 1000 }"#
        try await withSource(config, output: held.output) { stats in
            #expect(await Poll.until { stats.value("nats.redelivered") >= 20 })
            #expect(stats.value("nats.duplicates_dropped") == 0)
            #expect(held.positions.count >= 40)
            // Now handled: the next redeliveries of the same ids are dropped and acknowledged.
            held.releaseAll()
            #expect(await Poll.until { (try? await cluster.consumer("LOCGATE", "agg"))?.numAckPending == 0 })
        }
    }

    /// A position stored twice (published again with another message id, as a gateway re-sends
    /// after the stream's duplicate window) comes with a delivery count of 1, as does what a
    /// consumer's new leader delivers again: once the first copy was taken over, the second is
    /// acknowledged and dropped. Not so for positions without ids, whose ids are made up here.
    @Test(.timeLimit(.minutes(3)))
    func aPositionStoredTwiceIsEmittedOnceButNotTwoWithoutIDs() async throws {
        let cluster = try NATSCluster(size: 1)
        defer { cluster.stop() }
        try await cluster.start()
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"], replicas: 1)
        let publisher = try await cluster.connect()
        let config = #"{ "servers": [\#(cluster.urls.map { "\"\($0)\"" }.joined(separator: ", "))], "stream": "LOCGATE", "consumer": "agg" }"#
        let collector = PositionCollector()
        func isNew(_ r: NATSPublishResult) -> Bool {
            if case .stored(_, _, duplicate: false) = r { true } else { false }
        }
        try await withSource(config, output: collector.output) { stats in
            for i in 0..<5 {
                let r = try await publisher.publishAndWait(subject: "locgate.positions.van-0", payload: positionJSON(i), messageID: "first-\(i)", timeout: .seconds(5))
                #expect(isNew(r), "publish \(i): \(r)")
            }
            #expect(await collector.waitForCount(5))
            #expect(await Poll.until { (try? await cluster.consumer("LOCGATE", "agg"))?.numAckPending == 0 })
            // The same positions again, as new messages; and one never seen.
            for i in 0..<6 {
                let r = try await publisher.publishAndWait(subject: "locgate.positions.van-0", payload: positionJSON(i), messageID: "again-\(i)", timeout: .seconds(5))
                #expect(isNew(r), "publish again \(i): \(r)")
            }
            #expect(await collector.waitForCount(6))
            #expect(await Poll.until {
                guard let info = try? await cluster.consumer("LOCGATE", "agg") else { return false }
                return info.numAckPending == 0 && info.numPending == 0
            }, "the copies were not all acknowledged")
            #expect(stats.value("nats.duplicates_dropped") == 5)
            #expect(stats.value("nats.redelivered") == 0)
            // Without ids, two distinct positions of one device at one fix time get the same
            // id here: both go on (only a redelivery of one is dropped).
            for lat in ["31.5", "31.6"] {
                let json = #"{"class":"TPV","device":"van-0","time":"2024-05-01T01:00:00.000Z","lat":\#(lat),"lon":121.5,"mode":3}"#
                let r = try await publisher.publishAndWait(subject: "locgate.positions.van-0", payload: Array(json.utf8), messageID: "no-id-\(lat)", timeout: .seconds(5))
                #expect(isNew(r), "publish \(lat): \(r)")
            }
            #expect(await collector.waitForCount(8))
            #expect(await Poll.until { (try? await cluster.consumer("LOCGATE", "agg"))?.numAckPending == 0 })
            #expect(stats.value("nats.duplicates_dropped") == 5)
        }
        await publisher.close()
        #expect(collector.positions.prefix(6).map(\.id) == (0..<6).map { "rx-\($0)" })
        #expect(collector.positions.dropFirst(6).map(\.latitude) == [31.5, 31.6])
    }
}
