import Foundation
import Locking
import Testing

@Suite struct LockedTests {
    @Test func threadsThatIncrementUnderTheLockLoseNoIncrement() {
        let count = Locked(0)
        let threads = 4, rounds = 10_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<rounds { count.withLock { $0 += 1 } }
        }
        #expect(count.withLock { $0 } == threads * rounds)
    }

    /// What ThreadSanitizer checks (`make tsan`): state written under the lock on one thread and
    /// read under it on another is seen whole, so no race is reported.
    @Test func stateHandedBetweenThreadsUnderTheLockIsSeenWhole() {
        let box = Locked<(items: [Int], done: Bool)>(([], false))
        let finished = DispatchSemaphore(value: 0)
        let writer = Thread {
            for i in 0..<1_000 { box.withLock { $0.items.append(i) } }
            box.withLock { $0.done = true }
            finished.signal()
        }
        writer.start()
        #expect(finished.wait(timeout: .now() + 30) == .success, "the writer thread did not finish")
        #expect(box.withLock { $0.done })
        #expect(box.withLock { $0.items } == Array(0..<1_000))
    }

    @Test func aThrownErrorLeavesTheLockFree() {
        struct Refused: Error {}
        let value = Locked("before")
        #expect(throws: Refused.self) {
            try value.withLock { (s: inout String) throws(Refused) in
                s = "changed"
                throw Refused()
            }
        }
        // Locking again would deadlock if the throw had kept the lock.
        #expect(value.withLock { $0 } == "changed")
    }
}
