import Foundation
import GatewayCore
import GatewayTesting
import NATSClient
@testable import NATSState
import NATSTesting
import Testing

/// The Key-Value state store against a real 3-node JetStream cluster on loopback.
/// Serialized: each test runs its own cluster, and several at once would starve a 2-core machine.
@Suite(.serialized) struct KeyValueStateStoreTests {
    static func open(_ cluster: NATSCluster, bucket: String = "locgate-state", replicas: Int? = nil, servers: [String]? = nil,
                     log: RecordingLogHandler = RecordingLogHandler()) throws -> NATSKeyValueStateStore {
        var c = NATSStateConfiguration()
        c.connection.servers = servers ?? cluster.urls
        c.bucket = bucket
        c.replicas = replicas
        c.timeout = .seconds(20)
        return try NATSKeyValueStateStore(c, context: StateStoreContext(logger: log.logger(label: "state"), clock: SystemClock()))
    }

    static func record(_ device: String, _ value: Double, transform: String = "depot") -> DeviceStateRecord {
        DeviceStateRecord(transform: transform, device: device, format: "test/1", state: .object(JSONObject([("v", .number(value))])))
    }

    /// Writes and waits for the completion.
    static func write(_ store: NATSKeyValueStateStore, _ records: [DeviceStateRecord], sequence: UInt64) async -> (any Error)? {
        await withCheckedContinuation { (c: CheckedContinuation<(any Error)?, Never>) in
            store.write(records, sequence: sequence) { c.resume(returning: $0) }
        }
    }

    static func values(_ records: [DeviceStateRecord]) -> [String: Double] {
        var out: [String: Double] = [:]
        for r in records { if case .object(let o)? = r.state, case .number(let n)? = o["v"] { out[r.device] = n } }
        return out
    }

    @Test(.timeLimit(.minutes(2)))
    func writtenStateLoadsBackInAnotherStoreAndANilStateDeletesIt() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        let a = try Self.open(cluster)
        #expect(try a.load(transform: "depot").isEmpty)
        let devices = ["van-1", "van.2", "", "owntracks/anna/phone", "Zürich 1"]
        #expect(await Self.write(a, devices.enumerated().map { Self.record($1, Double($0)) }, sequence: 1) == nil)
        #expect(await Self.write(a, [Self.record("van-1", 10), Self.record("other-transform", 5, transform: "moved")], sequence: 2) == nil)
        #expect(await Self.write(a, [DeviceStateRecord(transform: "depot", device: "van.2", format: "test/1", state: nil)], sequence: 3) == nil)
        #expect(a.totals(transform: "depot")?.devices == 4)
        a.close()

        let b = try Self.open(cluster)
        defer { b.close() }
        let loaded = try b.load(transform: "depot")
        #expect(Self.values(loaded) == ["van-1": 10, "": 2, "owntracks/anna/phone": 3, "Zürich 1": 4])
        #expect(loaded.allSatisfy { $0.format == "test/1" && $0.transform == "depot" && $0.updatedMilliseconds > 0 })
        #expect(Self.values(try b.load(transform: "moved")) == ["other-transform": 5])
        // b read van-1's revision: its write is a compare-and-swap that succeeds.
        #expect(await Self.write(b, [Self.record("van-1", 11)], sequence: 4) == nil)
        #expect(b.conflicts == 0)
    }

    @Test(.timeLimit(.minutes(2)))
    func aWriterWithAStaleRevisionIsRefusedAndCountedAndTheOtherValueStays() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        let first = try Self.open(cluster)
        defer { first.close() }
        #expect(try first.load(transform: "depot").isEmpty)
        #expect(await Self.write(first, [Self.record("van-1", 1), Self.record("van-2", 1)], sequence: 1) == nil)

        // The second aggregator reads van-1 at revision r1; the first then writes r2.
        let second = try Self.open(cluster)
        defer { second.close() }
        #expect(Self.values(try second.load(transform: "depot")) == ["van-1": 1, "van-2": 1])
        #expect(await Self.write(first, [Self.record("van-1", 2)], sequence: 2) == nil)

        let error = await Self.write(second, [Self.record("van-1", 99), Self.record("van-2", 5)], sequence: 3)
        let conflict = try #require(error as? DeviceStateStoreError)
        #expect(conflict.isConflict)
        #expect(conflict.devices == ["depot/van-1"])
        #expect(second.conflicts == 1)
        // Refused for good: a later write of van-1 by the loser does not overwrite either.
        let again = await Self.write(second, [Self.record("van-1", 100)], sequence: 4)
        #expect((again as? DeviceStateStoreError)?.isConflict == true)
        #expect(second.conflicts == 2)

        let reader = try Self.open(cluster)
        defer { reader.close() }
        // van-2 was not contested: the second's write of it went through.
        #expect(Self.values(try reader.load(transform: "depot")) == ["van-1": 2, "van-2": 5])
        // And a gateway that never read a key cannot create it over another's value.
        let fresh = try Self.open(cluster)
        defer { fresh.close() }
        let created = await Self.write(fresh, [Self.record("van-1", 7)], sequence: 5)
        #expect((created as? DeviceStateStoreError)?.isConflict == true)
        #expect(Self.values(try reader.load(transform: "depot"))["van-1"] == 2)
    }

    @Test(.timeLimit(.minutes(2)), arguments: [(nil, 3), (1, 1), (3, 3)] as [(Int?, Int)])
    func theBucketIsCreatedWithTheAskedReplicas(asked: Int?, expected: Int) async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        // One server given: the default still finds the cluster's three from what it announces.
        let store = try Self.open(cluster, bucket: "state-r\(asked ?? 0)", replicas: asked, servers: [cluster.urls[0]])
        defer { store.close() }
        let c = try await cluster.connect()
        let info = try #require(try await c.streamInfo("KV_state-r\(asked ?? 0)"))
        await c.close()
        #expect(info.replicas == expected)
        #expect(info.fileStorage)
    }

    @Test(.timeLimit(.minutes(3)))
    func acknowledgedStateSurvivesAKilledNode() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        let store = try Self.open(cluster, replicas: 3)
        #expect(try store.load(transform: "depot").isEmpty)
        var expected: [String: Double] = [:]
        for round in 1...20 {
            let records = (0..<10).map { Self.record("dev-\($0)", Double(round * 100 + $0)) }
            #expect(await Self.write(store, records, sequence: UInt64(round)) == nil)
            for r in records { expected[r.device] = Self.values([r])[r.device] }
        }
        // kill -9 of one node: whatever it was (leader of the bucket's stream or not), a majority
        // stored every acknowledged write.
        cluster.kill9(0)
        let reader = try Self.open(cluster, servers: Array(cluster.urls.dropFirst()))
        #expect(Self.values(try reader.load(transform: "depot")) == expected)
        reader.close()
        // Writes go on with two of three (after an election, when the killed node led).
        for round in 21...25 {
            let records = (0..<10).map { Self.record("dev-\($0)", Double(round * 100 + $0)) }
            #expect(await Self.write(store, records, sequence: UInt64(round)) == nil)
            for r in records { expected[r.device] = Self.values([r])[r.device] }
        }
        store.close()
        try await cluster.restart(0)
        let after = try Self.open(cluster)
        defer { after.close() }
        let loaded = Self.values(try after.load(transform: "depot"))
        #expect(loaded == expected, "\(loaded.sorted { $0.key < $1.key })")
    }

    @Test(.timeLimit(.minutes(2)))
    func writesHandedInDuringARoundGatherIntoTheNext() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        let store = try Self.open(cluster)
        defer { store.close() }
        #expect(try store.load(transform: "depot").isEmpty)
        // 200 batches of the same 4 devices, handed in at once: far fewer key writes than changes.
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<200 {
                group.addTask { _ = await Self.write(store, (0..<4).map { Self.record("d\($0)", Double(i)) }, sequence: UInt64(i + 1)) }
            }
        }
        #expect(store.writes < 800)
        #expect(store.rounds < 200)
        let reader = try Self.open(cluster)
        defer { reader.close() }
        // Whatever gathered, the newest sequence's value is what is stored.
        #expect(Self.values(try reader.load(transform: "depot")) == ["d0": 199, "d1": 199, "d2": 199, "d3": 199])
    }
}
