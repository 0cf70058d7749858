import Locking
import Synchronization

extension Pipeline {
    /// The routes out of every source and transform at one moment; immutable, replaced whole by a
    /// reload.
    ///
    /// A reader (a source routing one batch, the tick loop, shutdown) enters the table it got from
    /// ``Routing/acquire()`` and leaves it when the batch has gone all the way; ``retire()`` waits
    /// until every reader of a replaced table has left, so a reload knows when nothing can still
    /// arrive at an old sink buffer.
    final class RoutingTable: Sendable {
        let sources: [String: [Route]]
        /// Every transform, inputs first, with its routes (for ticks and `finish`).
        let transforms: [(TransformNode, [Route])]
        private let readers = Atomic<Int>(0)
        private let retired = Atomic<Bool>(false)
        private let drained = ShutdownTrigger()

        init(sources: [String: [Route]], transforms: [(TransformNode, [Route])]) {
            self.sources = sources
            self.transforms = transforms
        }

        /// Called under the routing lock, so no reader can enter a table after it was swapped out.
        fileprivate func enter() {
            readers.add(1, ordering: .sequentiallyConsistent)
        }

        func leave() {
            if readers.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 && retired.load(ordering: .sequentiallyConsistent) {
                drained.fire(reason: "drained")
            }
        }

        /// True once the table was retired and every reader left (``retire()`` returns then).
        var isDrained: Bool { drained.isFired }

        /// Waits until every reader left; call once the table was swapped out.
        func retire() async {
            retired.store(true, ordering: .sequentiallyConsistent)
            // Either this sees the last reader gone, or that reader sees `retired` and fires.
            if readers.load(ordering: .sequentiallyConsistent) == 0 { drained.fire(reason: "drained") }
            await drained.wait()
        }
    }

    /// The current routing table: one lock per batch to read it, swapped whole by a reload.
    final class Routing: Sendable {
        private let current: Locked<RoutingTable>

        init(_ table: RoutingTable) { current = Locked(table) }

        /// The current table, entered: call `leave()` on it when the batch is routed.
        func acquire() -> RoutingTable {
            current.withLock { t in
                t.enter()
                return t
            }
        }

        /// The current table without entering it (to look at, not to route through).
        func peek() -> RoutingTable { current.withLock { $0 } }

        /// Installs `table` and returns the one it replaced (to retire).
        func swap(_ table: RoutingTable) -> RoutingTable {
            current.withLock { t in
                let old = t
                t = table
                return old
            }
        }
    }
}
