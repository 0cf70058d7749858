import GatewayCore
import Locking

/// An outbox in memory: lost when the process stops (the `"queue": null` mode).
///
/// Bounded at ``capacity`` records; beyond it the oldest are dropped (and counted by the sink).
/// Keeps no dead letters: the sink has logged and counted them.
public final class MemoryOutbox: Outbox {
    private struct State {
        var records: [OutboxRecord] = []
        var head = 0
        var nextSeq: Int64 = 1
        var inFlight: Int64?

        var live: ArraySlice<OutboxRecord> { records[head...] }

        mutating func compact() {
            if head > 4096 && head * 2 > records.count {
                records.removeFirst(head)
                head = 0
            }
        }

        /// Index of the first live record with a seq above `seq` (records are in seq order).
        func firstIndex(after seq: Int64) -> Int {
            var lo = head, hi = records.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if records[mid].seq <= seq { lo = mid + 1 } else { hi = mid }
            }
            return lo
        }
    }

    public let capacity: Int
    private let state = Locked(State())
    private let removalObserver = Locked<(@Sendable (_ oldestLeft: Int64?) -> Void)?>(nil)

    public init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Calls `observer` after records left the queue (delivered, dead-lettered, expired or
    /// dropped over capacity) with the seq of the oldest record left, nil when it is empty: a
    /// memory queue persists nothing, so what it received counts as taken over only once it left.
    public func observeRemovals(_ observer: @escaping @Sendable (_ oldestLeft: Int64?) -> Void) {
        removalObserver.withLock { $0 = observer }
    }

    /// The seq of the newest record appended (0 before any).
    public var newestSeq: Int64 { state.withLock { $0.nextSeq - 1 } }

    /// The seq of the oldest record left; nil when empty.
    public var oldestSeq: Int64? { state.withLock { s in s.live.first?.seq } }

    private func removed() {
        guard let observer = removalObserver.withLock({ $0 }) else { return }
        observer(oldestSeq)
    }

    public var location: String { "memory" }

    public func append(_ entries: [OutboxEntry], at now: Timestamp) throws -> Int {
        let dropped = state.withLock { s -> Int in
            for e in entries {
                s.records.append(OutboxRecord(seq: s.nextSeq, id: e.id, key: e.key, payload: e.payload,
                                              enqueuedAt: OutboxAge.origin(fix: e.time, commit: now.milliseconds)))
                s.nextSeq += 1
            }
            let excess = s.records.count - s.head - capacity
            guard excess > 0 else { return 0 }
            s.head += excess
            s.inFlight = nil
            s.compact()
            return excess
        }
        if dropped > 0 { removed() }
        return dropped
    }

    public func records(after seq: Int64, limit: Int) throws -> [OutboxRecord] {
        state.withLock { s in
            let start = s.firstIndex(after: seq)
            return Array(s.records[start..<min(s.records.count, start + limit)])
        }
    }

    public func newestSeq(forKey key: String) throws -> Int64? {
        state.withLock { s in s.live.last(where: { $0.key == key })?.seq }
    }

    public func remove(through seq: Int64) throws {
        state.withLock { s in
            s.head = s.firstIndex(after: seq)
            if let f = s.inFlight, seq >= f { s.inFlight = nil }
            s.compact()
        }
        removed()
    }

    public func remove(_ seqs: [Int64]) throws {
        guard !seqs.isEmpty else { return }
        var gone = Set(seqs)
        state.withLock { s in
            // Acks come mostly in order: advance over the acknowledged front without copying.
            while s.head < s.records.count, gone.remove(s.records[s.head].seq) != nil { s.head += 1 }
            if !gone.isEmpty, s.live.contains(where: { gone.contains($0.seq) }) {
                s.records = s.live.filter { !gone.contains($0.seq) }
                s.head = 0
            }
            s.compact()
        }
        removed()
    }

    public func deadLetter(_ records: [OutboxRecord], status: Int, answer: String, at now: Timestamp) throws {
        try remove(records.map(\.seq))
        if let last = records.map(\.seq).max() {
            state.withLock { s in if let f = s.inFlight, last >= f { s.inFlight = nil } }
        }
    }

    public func dropOlder(than cutoff: Timestamp) throws -> Int {
        let n = state.withLock { s -> Int in
            // Ages need not follow queue order: look at every record.
            guard s.live.contains(where: { $0.enqueuedAt < cutoff.milliseconds }) else { return 0 }
            let kept = s.live.filter { $0.enqueuedAt >= cutoff.milliseconds }
            let n = s.live.count - kept.count
            s.records = Array(kept)
            s.head = 0
            s.inFlight = nil
            return n
        }
        if n > 0 { removed() }
        return n
    }

    public var depth: Int { state.withLock { $0.records.count - $0.head } }

    public var inFlightThrough: Int64? { state.withLock { $0.inFlight } }

    /// Nothing survives a power cut here: `durably` changes nothing.
    public func markInFlight(through seq: Int64, durably: Bool) throws { state.withLock { $0.inFlight = seq } }

    public var oldestEnqueuedAt: Int64? { state.withLock { s in s.live.lazy.map(\.enqueuedAt).min() } }

    public func deadLetterCount() throws -> Int { 0 }

    public func close() {}
}
