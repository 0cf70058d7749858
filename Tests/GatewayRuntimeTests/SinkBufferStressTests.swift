import GatewayCore
import GatewayRuntime
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(3))) struct SinkBufferStressTests {
    /// Batches larger than the capacity: a sender that is told to wait, then finds the buffer
    /// emptied before it registers, never wakes.
    @Test func batchLargerThanCapacityNeverDeadlocks() async throws {
        let rounds = 50
        var hung = 0
        for round in 0..<rounds {
            let buf = SinkBuffer(capacity: 1, policy: .block, durable: false, stats: ComponentStats(id: "s"))
            let sent = Counter()
            let got = Counter()
            let n = 5_000
            let ok: Bool = await withTaskGroup(of: Bool.self) { g in
                g.addTask {
                    let p = Position(id: "x")
                    for _ in 0..<n { await buf.send([p, p]); sent.add(1) }
                    buf.close()
                    return true
                }
                g.addTask {
                    while true {
                        switch await buf.next(timeout: nil) {
                        case .positions(let ps): got.add(ps.count)
                        case .end: return true
                        case .timeout: continue
                        }
                    }
                }
                g.addTask {
                    try? await Task.sleep(for: .seconds(10))
                    return false
                }
                var finished = 0
                for await r in g {
                    if r { finished += 1; if finished == 2 { g.cancelAll(); return true } } else { g.cancelAll(); return false }
                }
                return false
            }
            if !ok {
                hung += 1
                Issue.record("round \(round): hung after sent=\(sent.value) of \(n) batches, consumer got \(got.value) positions, depth=\(buf.depth)")
                break
            }
        }
        #expect(hung == 0)
    }
}

final class Counter: Sendable {
    private let m = Mutex(0)
    func add(_ n: Int) { m.withLock { $0 += n } }
    var value: Int { m.withLock { $0 } }
}
