import Foundation
import GatewayCore
import GatewayTesting
@testable import SQLiteState
import Locking
import Testing

/// The SQLite state store (`settings.state`): what is written is read back after a reopen, in
/// sequence order, gathered into few transactions, expired after `max_age`, and held by one
/// gateway at a time.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct StateStoreTests {
    static func record(_ device: String, _ value: Double?, transform: String = "fence") -> DeviceStateRecord {
        DeviceStateRecord(transform: transform, device: device, format: "test/1", state: value.map { .object(JSONObject([("v", .number($0))])) })
    }

    /// Writes and waits for the completion.
    static func write(_ store: SQLiteStateStore, _ records: [DeviceStateRecord], sequence: UInt64) async throws {
        let error: (any Error)? = await withCheckedContinuation { c in store.write(records, sequence: sequence) { c.resume(returning: $0) } }
        if let error { throw error }
    }

    static func values(_ store: SQLiteStateStore, transform: String = "fence") throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try store.load(transform: transform).map { ($0.device, $0.state?.jsonText ?? "nil") })
    }

    @Test func writesAreReadBackAfterAReopenAndANilStateForgets() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.sqlite"
        var store = try SQLiteStateStore(path: path)
        try await Self.write(store, [Self.record("a", 1), Self.record("b", 2), Self.record("a", 9, transform: "moved")], sequence: 1)
        try await Self.write(store, [Self.record("b", nil)], sequence: 2)
        #expect(store.totals(transform: "fence")?.devices == 1)
        store.close()
        store = try SQLiteStateStore(path: path)
        defer { store.close() }
        #expect(try Self.values(store) == ["a": #"{"v":1}"#])
        #expect(try Self.values(store, transform: "moved") == ["a": #"{"v":9}"#])
        let totals = try #require(store.totals(transform: "fence"))
        #expect(totals == (1, 1 + 7))
        let all = try SQLiteStateStore.read(path: path)
        #expect(all.map(\.transform) == ["fence", "moved"])
        #expect(all.allSatisfy { $0.format == "test/1" && $0.updatedMilliseconds > 0 })
    }

    /// Acknowledgements may complete out of order (two sinks): an older batch's state written
    /// after a newer one's must not roll the device back.
    @Test func anOlderSequenceNeverOverwritesANewerOne() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteStateStore(path: dir + "/state.sqlite")
        defer { store.close() }
        try await Self.write(store, [Self.record("a", 5)], sequence: 5)
        try await Self.write(store, [Self.record("a", 3), Self.record("b", 3)], sequence: 3)
        #expect(try Self.values(store) == ["a": #"{"v":5}"#, "b": #"{"v":3}"#])
    }

    /// Writes handed in while a commit waits (here for another process's lock, as for a slow
    /// fsync) go into one transaction together, and each completion still comes.
    @Test func writesThatArriveDuringACommitShareTheNextTransaction() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.sqlite"
        let store = try SQLiteStateStore(path: path)
        defer { store.close() }
        let holder = try SQLiteLockHolder(path: path)
        let done = Locked(0)
        for i in 0..<50 {
            store.write([Self.record("d\(i)", Double(i))], sequence: UInt64(i + 1)) { error in
                #expect(error == nil)
                done.withLock { $0 += 1 }
            }
        }
        #expect(done.withLock { $0 } == 0, "committed while another process held the lock")
        holder.finish()
        #expect(await Poll.until(timeout: .seconds(10)) { done.withLock { $0 } == 50 })
        #expect(store.transactions <= 2, "\(store.transactions) transactions for 50 writes")
        #expect(try Self.values(store).count == 50)
    }

    /// Writes nobody waits for are gathered for a moment; a write someone waits for does not wait
    /// behind them, and takes them along.
    @Test func lazyWritesAreGatheredAndAnUrgentOneTakesThemAlong() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteStateStore(path: dir + "/state.sqlite")
        defer { store.close() }
        let done = Locked(0)
        for i in 0..<20 {
            store.writeLazily([Self.record("d\(i)", Double(i))], sequence: UInt64(i + 1)) { error in
                #expect(error == nil)
                done.withLock { $0 += 1 }
            }
        }
        #expect(await Poll.until(timeout: .seconds(10)) { done.withLock { $0 } == 20 })
        #expect(store.transactions == 1, "\(store.transactions) transactions for 20 lazy writes")
        for i in 20..<25 {
            store.writeLazily([Self.record("d\(i)", Double(i))], sequence: UInt64(i + 1)) { _ in done.withLock { $0 += 1 } }
        }
        try await Self.write(store, [Self.record("urgent", 1)], sequence: 100)
        #expect(done.withLock { $0 } == 25, "the lazy writes went with the urgent one")
        #expect(store.transactions == 2)
        #expect(try Self.values(store).count == 26)
    }

    @Test func stateOlderThanMaxAgeIsForgottenAtStart() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.sqlite"
        let clock = ManualClock()
        var store = try SQLiteStateStore(path: path, maxAge: .seconds(86_400), clock: clock)
        try await Self.write(store, [Self.record("old", 1)], sequence: 1)
        clock.advance(by: .seconds(3_600))
        try await Self.write(store, [Self.record("recent", 2)], sequence: 2)
        store.close()
        clock.advance(by: .seconds(86_400 - 1_800))
        store = try SQLiteStateStore(path: path, maxAge: .seconds(86_400), clock: clock)
        defer { store.close() }
        #expect(try Self.values(store) == ["recent": #"{"v":2}"#])
    }

    /// One gateway at a time: a second store on the file, and `locgate state forget`, are refused
    /// while it is open; once closed, forget deletes the device from every transform.
    @Test func theStoreIsHeldByOneGatewayAtATime() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.sqlite"
        let store = try SQLiteStateStore(path: path)
        try await Self.write(store, [Self.record("a", 1), Self.record("a", 2, transform: "moved"), Self.record("b", 3)], sequence: 1)
        #expect { _ = try SQLiteStateStore(path: path) } throws: { "\($0)".contains("in use by another locgate") }
        #expect { _ = try SQLiteStateStore.forget(device: "a", path: path) } throws: { "\($0)".contains("in use") }
        #expect(try SQLiteStateStore.read(path: path).count == 3, "readable while held")
        store.close()
        #expect(try SQLiteStateStore.forget(device: "a", path: path) == 2)
        #expect(try SQLiteStateStore.read(path: path).map(\.device) == ["b"])
        #expect { _ = try SQLiteStateStore.read(path: dir + "/none.sqlite") } throws: { "\($0)".contains("no state store") }
    }
}
