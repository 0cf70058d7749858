import Foundation
import GatewayCore
import GatewayTesting
import Locking
import NATSClient
@testable import NATSState
import NATSTesting
import Testing

/// The Key-Value state store against a real 3-node JetStream cluster on loopback.
/// Serialized: each test runs its own cluster, and several at once would starve a 2-core machine.
@Suite(.serialized) struct KeyValueStateStoreTests {
    static func open(_ cluster: NATSCluster, bucket: String = "locgate-state", replicas: Int? = nil, servers: [String]? = nil,
                     timeout: Duration = .seconds(20), log: RecordingLogHandler = RecordingLogHandler()) throws -> NATSKeyValueStateStore {
        var c = NATSStateConfiguration()
        c.connection.servers = servers ?? cluster.urls
        c.bucket = bucket
        c.replicas = replicas
        c.timeout = timeout
        return try NATSKeyValueStateStore(c, context: StateStoreContext(logger: log.logger(label: "state"), clock: .system))
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

    /// A device's state deleted.
    static func deletion(_ device: String, transform: String = "depot") -> DeviceStateRecord {
        DeviceStateRecord(transform: transform, device: device, format: "test/1", state: nil)
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
        #expect(await Self.write(a, [Self.deletion("van.2")], sequence: 3) == nil)
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

    // MARK: - Writes that got no answer

    /// A store whose bucket is wrapped in an ``UnansweredWriteBucket``.
    static func openHolding(_ cluster: NATSCluster, clock: any GatewayClock = .system) throws -> (store: NATSKeyValueStateStore, bucket: UnansweredWriteBucket) {
        var c = NATSStateConfiguration()
        c.connection.servers = cluster.urls
        c.bucket = "locgate-state"
        c.timeout = .seconds(20)
        var made: UnansweredWriteBucket?
        let store = try NATSKeyValueStateStore(c, interval: .zero, maxAge: StateSettings.defaultMaxAge,
                                               context: StateStoreContext(logger: RecordingLogHandler().logger(label: "state"), clock: clock),
                                               bucket: { b in
            let w = UnansweredWriteBucket(b)
            made = w
            return w
        })
        guard let made else { throw ClusterError("the store bound no bucket") }
        return (store, made)
    }

    /// A one-node cluster and a store on an ``UnansweredWriteBucket``, with `first` written
    /// (sequence 1) while every write is answered; `body` holds the writes after it.
    static func withHoldingStore(first: [DeviceStateRecord] = [record("van-1", 1)], clock: any GatewayClock = .system,
                                 _ body: (NATSCluster, NATSKeyValueStateStore, UnansweredWriteBucket) async throws -> Void) async throws {
        let cluster = try NATSCluster(size: 1)
        defer { cluster.stop() }
        try await cluster.start()
        let (store, bucket) = try openHolding(cluster, clock: clock)
        defer { store.close() }
        #expect(try store.load(transform: "depot").isEmpty)
        #expect(await write(store, first, sequence: 1) == nil)
        try await body(cluster, store, bucket)
    }

    /// The values of the "depot" transform as another store loads them from the bucket.
    static func stored(in cluster: NATSCluster) throws -> [String: Double] {
        let reader = try open(cluster)
        defer { reader.close() }
        return values(try reader.load(transform: "depot"))
    }

    /// The colleague's kill -9/cluster report: a write that got no answer but was stored, seen
    /// too late by the read-back before the next write (the proposal was still in flight), or
    /// not seen by it (answered by a replica that is behind). The next write names the revision
    /// before it and the server refuses it: that is the store's own value, which is adopted and
    /// written on, not another gateway's. (With real servers only nats-server 2.11 and later show
    /// the first case on their own: they refuse a write while one of its key is in flight, as
    /// a SIGSTOP of both followers makes the leader do; 2.9 stores both.)
    @Test(.timeLimit(.minutes(1)), arguments: [UnansweredWriteBucket.Landing.afterTheReadBack, .beforeAReadFromAReplicaBehind])
    func aWriteStoredWithoutAnAnswerIsAdoptedWhenItRefusesTheNext(landing: UnansweredWriteBucket.Landing) async throws {
        try await Self.withHoldingStore { cluster, store, bucket throws in
            bucket.holdNextWrite(landing)
            let error = await Self.write(store, [Self.record("van-1", 2)], sequence: 2)
            #expect(error == nil, "\(String(describing: error))")
            #expect(bucket.landed)
            #expect(store.conflicts == 0)
            #expect(store.totals(transform: "depot")?.devices == 1)
            #expect(try Self.stored(in: cluster) == ["van-1": 2])
            // The store goes on writing the key on the revision it adopted.
            #expect(await Self.write(store, [Self.record("van-1", 3)], sequence: 3) == nil)
            #expect(try Self.stored(in: cluster) == ["van-1": 3])
        }
    }

    /// A delete checks the key's revision first: there the write that got no answer shows up
    /// (the read-back came from a replica that is behind) as a revision this gateway did not
    /// know, which is its own, not another gateway's.
    @Test(.timeLimit(.minutes(1)))
    func aDeleteAfterAWriteStoredWithoutAnAnswerIsNotAConflict() async throws {
        try await Self.withHoldingStore(first: [Self.record("van-1", 1), Self.record("van-2", 1)]) { cluster, store, bucket throws in
            bucket.holdNextWrite(.beforeAReadFromAReplicaBehind)
            async let written = Self.write(store, [Self.record("van-1", 2)], sequence: 2)
            // Once the write went unanswered, the delete joins it in the round that tries it again.
            #expect(await Poll.until { bucket.held })
            let deleted = await Self.write(store, [Self.deletion("van-1")], sequence: 3)
            #expect(deleted == nil, "\(String(describing: deleted))")
            let error = await written
            #expect(error == nil, "\(String(describing: error))")
            #expect(store.conflicts == 0)
            #expect(store.totals(transform: "depot")?.devices == 1)
            #expect(try Self.stored(in: cluster) == ["van-2": 1])
        }
    }

    /// The same refusal when the value that landed is another gateway's (the write without an
    /// answer was lost): still a conflict, and that gateway's value stays.
    @Test(.timeLimit(.minutes(1)))
    func anotherGatewaysValueLandingAfterTheReadBackIsStillAConflict() async throws {
        try await Self.withHoldingStore { cluster, store, bucket throws in
            let theirs = Self.record("van-1", 99)
            let state = try #require(theirs.state)
            bucket.holdNextWrite(.lostAndAnothersLandsAfterTheReadBack(NATSKeyValueStateStore.encode(theirs, value: state, now: 1, writer: "another-gateway")))
            let error = await Self.write(store, [Self.record("van-1", 2)], sequence: 2)
            #expect((error as? DeviceStateStoreError)?.devices == ["depot/van-1"])
            #expect((error as? DeviceStateStoreError)?.isConflict == true)
            #expect(bucket.landed)
            #expect(store.conflicts == 1)
            let again = await Self.write(store, [Self.record("van-1", 3)], sequence: 3)
            #expect((again as? DeviceStateStoreError)?.isConflict == true)
            #expect(try Self.stored(in: cluster) == ["van-1": 99])
        }
    }

    /// A delete that was stored without an answer, then a newer write of the key in the round
    /// that tries again: the write names the revision before the delete and is refused; the
    /// leader shows the store's own delete, so the key is written anew, not called another
    /// gateway's.
    @Test(.timeLimit(.minutes(1)))
    func aWriteAfterADeleteStoredWithoutAnAnswerIsNotAConflict() async throws {
        try await Self.withHoldingStore { cluster, store, bucket throws in
            bucket.holdNextDelete()
            async let deleted = Self.write(store, [Self.deletion("van-1")], sequence: 2)
            #expect(await Poll.until { bucket.held })
            let written = await Self.write(store, [Self.record("van-1", 3)], sequence: 3)
            #expect(written == nil, "\(String(describing: written))")
            let deleteError = await deleted
            #expect(deleteError == nil, "\(String(describing: deleteError))")
            #expect(bucket.landed)
            #expect(store.conflicts == 0)
            #expect(store.totals(transform: "depot")?.devices == 1)
            #expect(try Self.stored(in: cluster) == ["van-1": 3])
        }
    }

    /// Another gateway's value equal to ours, written in the same millisecond (two aggregators
    /// on one partition compute the same state): still another gateway's, not a write of ours
    /// that got no answer.
    @Test(.timeLimit(.minutes(1)))
    func aValueLikeOursWrittenByAnotherGatewayIsStillAConflict() async throws {
        let clock = ManualClock()
        try await Self.withHoldingStore(clock: clock) { _, store, bucket throws in
            let same = Self.record("van-1", 2)
            let state = try #require(same.state)
            bucket.holdNextWrite(.lostAndAnothersLandsAfterTheReadBack(NATSKeyValueStateStore.encode(same, value: state, now: clock.now().milliseconds, writer: "another-gateway")))
            let error = await Self.write(store, [same], sequence: 2)
            #expect((error as? DeviceStateStoreError)?.isConflict == true, "\(String(describing: error))")
            #expect(bucket.landed)
            #expect(store.conflicts == 1)
        }
    }
}

/// A real bucket whose next write, once armed, gets no answer (it fails as a timeout does) and
/// is stored when the test's ``Landing`` says: the timing of a write that was still in flight,
/// or of a replica that is behind, which a real cluster does not show on demand.
final class UnansweredWriteBucket: StateBucket, @unchecked Sendable {
    enum Landing: Sendable, CustomStringConvertible {
        /// Stored right after the store's next read of the key has been answered.
        case afterTheReadBack
        /// Stored at once; the next read of the key answers the entry before it.
        case beforeAReadFromAReplicaBehind
        /// Never stored; this value (another gateway's, naming the same revision) is stored
        /// right after the next read instead.
        case lostAndAnothersLandsAfterTheReadBack([UInt8])

        var description: String {
            switch self {
            case .afterTheReadBack: "after the read-back"
            case .beforeAReadFromAReplicaBehind: "before a read from a replica that is behind"
            case .lostAndAnothersLandsAfterTheReadBack: "lost, another gateway's after the read-back"
            }
        }
    }

    struct Unanswered: Error, CustomStringConvertible {
        var description: String { "Timeout (the test held the answer)" }
    }

    private struct Plan {
        var armed: Landing?
        /// Stored after the next read: key, value, revision named (nil: a create).
        var afterRead: (key: String, value: [UInt8], last: UInt64?)?
        /// Answered to the next read instead of the bucket's entry.
        var staleRead: NATSKeyValueEntry??
        var held = false
        var landed = false
        /// The next delete is stored and gets no answer.
        var deleteArmed = false
    }

    private let inner: NATSKeyValueBucket
    private let plan = Locked(Plan())

    init(_ inner: NATSKeyValueBucket) { self.inner = inner }

    var name: String { inner.name }
    /// The armed write came and got no answer.
    var held: Bool { plan.withLock { $0.held } }
    /// The held write (or the other gateway's value) was stored.
    var landed: Bool { plan.withLock { $0.landed } }

    func holdNextWrite(_ landing: Landing) { plan.withLock { $0.armed = landing } }

    /// The next delete is stored at once but gets no answer.
    func holdNextDelete() { plan.withLock { $0.deleteArmed = true } }

    func entries(matching filter: String, timeout: Duration) throws -> [NATSKeyValueEntry] {
        try inner.entries(matching: filter, timeout: timeout)
    }

    func get(_ key: String) throws -> NATSKeyValueEntry? {
        let (afterRead, staleRead) = plan.withLock { p in
            defer { p.afterRead = nil; p.staleRead = nil }
            return (p.afterRead, p.staleRead)
        }
        if let staleRead { return staleRead }
        let current = try inner.get(key)
        if let w = afterRead { try store(w.key, w.value, last: w.last) }
        return current
    }

    func latest(_ key: String) throws -> NATSKeyValueEntry? { try inner.latest(key) }

    func create(_ key: String, value: [UInt8]) throws -> NATSKeyValueWrite { try write(key, value, last: nil) }

    func update(_ key: String, value: [UInt8], last: UInt64) throws -> NATSKeyValueWrite { try write(key, value, last: last) }

    func delete(_ key: String) throws {
        let held = plan.withLock { p in defer { p.held = p.held || p.deleteArmed; p.deleteArmed = false }; return p.deleteArmed }
        try inner.delete(key)
        if held {
            plan.withLock { $0.landed = true }
            throw Unanswered()
        }
    }

    private func write(_ key: String, _ value: [UInt8], last: UInt64?) throws -> NATSKeyValueWrite {
        guard let landing = plan.withLock({ p in defer { p.held = p.held || p.armed != nil; p.armed = nil }; return p.armed }) else {
            return try last.map { try inner.update(key, value: value, last: $0) } ?? inner.create(key, value: value)
        }
        switch landing {
        case .afterTheReadBack:
            plan.withLock { $0.afterRead = (key, value, last) }
        case .beforeAReadFromAReplicaBehind:
            let before = try inner.latest(key)
            try store(key, value, last: last)
            plan.withLock { $0.staleRead = .some(before) }
        case .lostAndAnothersLandsAfterTheReadBack(let theirs):
            plan.withLock { $0.afterRead = (key, theirs, last) }
        }
        throw Unanswered()
    }

    private func store(_ key: String, _ value: [UInt8], last: UInt64?) throws {
        let result = try last.map { try inner.update(key, value: value, last: $0) } ?? inner.create(key, value: value)
        guard case .written = result else { throw ClusterError("the held write was refused: \(result)") }
        plan.withLock { $0.landed = true }
    }
}
