import Locking

/// The ids of the positions handled most recently, bounded: a message JetStream delivers again
/// (its ack was lost, or came after `ack_wait`) whose position was already taken over is
/// dropped by it. Oldest first out, so the memory stays at `capacity` ids.
final class RecentIDs: Sendable {
    private struct State {
        var members: Set<String> = []
        var ring: [String] = []
        var next = 0
    }

    let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func contains(_ id: String) -> Bool { state.withLock { $0.members.contains(id) } }

    var count: Int { state.withLock { $0.members.count } }

    func insert(_ ids: [String]) {
        state.withLock { s in
            for id in ids where !s.members.contains(id) {
                if s.ring.count < capacity {
                    s.ring.append(id)
                } else {
                    s.members.remove(s.ring[s.next])
                    s.ring[s.next] = id
                    s.next = (s.next + 1) % capacity
                }
                s.members.insert(id)
            }
        }
    }
}
