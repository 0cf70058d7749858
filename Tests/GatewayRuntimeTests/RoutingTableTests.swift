@testable import GatewayRuntime
import GatewayTesting
import Synchronization
import Testing

/// A reload swaps the routing table and then retires the old one: `retire()` must return only
/// once every batch that was routed through the old table has gone all the way (so nothing can
/// still arrive at a sink that is about to be stopped), and no batch may enter a retired table.
@Suite(.timeLimit(.minutes(1))) struct RoutingTableTests {
    /// A shared integer the tasks of one test update.
    final class Shared: Sendable {
        private let atomic = Atomic<Int>(0)
        var value: Int { atomic.load(ordering: .sequentiallyConsistent) }
        func add(_ n: Int) { atomic.add(n, ordering: .sequentiallyConsistent) }
    }

    static func table() -> Pipeline.RoutingTable { Pipeline.RoutingTable(sources: [:], transforms: []) }

    @Test func retireWaitsForTheReaderStillInTheOldTable() async throws {
        let old = Self.table(), new = Self.table()
        let routing = Pipeline.Routing(old)
        let reader = routing.acquire()  // a batch on its way through the old table
        #expect(reader === old)
        #expect(routing.swap(new) === old)
        #expect(routing.acquire() === new)  // batches from now on take the new table
        new.leave()
        let retired = Shared()
        let retiring = Task {
            await old.retire()
            retired.add(1)
        }
        // However often the retiring task runs, it cannot finish while the reader is inside.
        for _ in 0..<1_000 { await Task.yield() }
        let early = retired.value
        #expect(early == 0)
        reader.leave()
        await retiring.value
        let late = retired.value
        #expect(late == 1)
    }

    /// The last reader left before the table was retired: nobody is left to end the wait, so
    /// `retire()` must see that itself and drain the table as it starts.
    @Test func retiringATableNobodyIsInReturnsAtOnce() async {
        let old = Self.table()
        let routing = Pipeline.Routing(old)
        routing.acquire().leave()
        #expect(routing.swap(Self.table()) === old)
        #expect(!old.isDrained, "not drained before it is retired")
        let retiring = Task { await old.retire() }
        for _ in 0..<1_000 where !old.isDrained { await Task.yield() }
        #expect(old.isDrained, "retire() waits for a reader that already left")
        // Only then: a retire that waits for nobody would hang the test until its time limit.
        if old.isDrained { await retiring.value }
    }

    /// Readers entering and leaving on many tasks while the table is swapped and retired: when
    /// `retire()` returns, no reader is inside the old table, and none entered it afterwards.
    @Test func retireReturnsOnlyAfterTheLastConcurrentReaderLeft() async {
        for round in 0..<50 {
            let old = Self.table(), new = Self.table()
            let routing = Pipeline.Routing(old)
            let insideOld = Shared(), enteredOldAfterRetire = Shared(), done = Shared()
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        for i in 0..<200 {
                            let t = routing.acquire()
                            if t === old {
                                insideOld.add(1)
                                if done.value != 0 { enteredOldAfterRetire.add(1) }
                                if i % 7 == 0 { await Task.yield() }  // a batch that takes a while
                                insideOld.add(-1)
                            }
                            t.leave()
                        }
                    }
                }
                group.addTask {
                    for _ in 0..<(round % 10) { await Task.yield() }
                    _ = routing.swap(new)
                    await old.retire()
                    done.add(1)
                    let inside = insideOld.value
                    #expect(inside == 0, "round \(round)")
                }
            }
            let late = enteredOldAfterRetire.value
            #expect(late == 0, "round \(round)")
        }
    }
}
