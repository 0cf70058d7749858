import GatewayCore
import Synchronization

/// One position waiting in a sink's queue, as its JSON text (``PositionJSON``).
struct QueuedRecord: Sendable {
    /// Queue order: strictly increasing, never reused.
    var seq: Int64
    var id: String
    var json: [UInt8]
    /// When the record was committed (ms since 1970), for `queue.max_age`.
    var enqueuedAt: Int64
}

/// Where the HTTP sink keeps positions until the server accepted them, oldest first.
///
/// Two implementations: ``DurableQueue`` (SQLite, survives crashes) and ``MemoryQueue`` (lost
/// with the process). Both are safe to use from the sink's receiving and uploading tasks at once.
protocol PositionQueue: Sendable {
    /// Commits records at the end of the queue; returns how many old records the record cap dropped.
    ///
    /// A record's age (for `queue.max_age`) counts from ``PositionAge/origin(fix:commit:)``.
    func append(_ records: [(id: String, json: [UInt8], time: Int64?)], at now: Timestamp) throws -> Int
    /// Up to `limit` records from the front of the queue, oldest first.
    func oldest(limit: Int) throws -> [QueuedRecord]
    /// Removes every record up to and including `seq` (after the server accepted them).
    func remove(through seq: Int64) throws
    /// Moves records to the dead letters with the server's answer (a rejection retrying cannot fix).
    func deadLetter(_ records: [QueuedRecord], status: Int, answer: String, at now: Timestamp) throws
    /// Drops records committed before `cutoff`; returns how many.
    func dropOlder(than cutoff: Timestamp) throws -> Int
    /// Records waiting.
    var depth: Int { get }
    /// Age origin (fix time, else commit time) of the oldest waiting record.
    var oldestEnqueuedAt: Int64? { get }
    /// Records up to this seq were sent in a request not yet settled (kept across a restart, so
    /// the same batch, with the same Idempotency-Key, is sent again first).
    var inFlightThrough: Int64? { get }
    /// Notes that records up to `seq` are being sent; cleared when they are removed or dead-lettered.
    func markInFlight(through seq: Int64) throws
}

extension PositionQueue {
    /// Records without fix times (their age counts from `now`).
    func append(_ records: [(id: String, json: [UInt8])], at now: Timestamp) throws -> Int {
        try append(records.map { ($0.id, $0.json, nil) }, at: now)
    }
}

/// A queue in memory: lost when the process stops (the `"queue": null` mode).
///
/// Bounded at ``capacity`` records; beyond it the oldest are dropped (and counted by the sink).
final class MemoryQueue: PositionQueue {
    private struct State {
        var records: [QueuedRecord] = []
        var head = 0
        var nextSeq: Int64 = 1
        var deadLetters = 0
        var inFlight: Int64?

        mutating func compact() {
            if head > 4096 && head * 2 > records.count {
                records.removeFirst(head)
                head = 0
            }
        }
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func append(_ records: [(id: String, json: [UInt8], time: Int64?)], at now: Timestamp) throws -> Int {
        state.withLock { s in
            for r in records {
                s.records.append(QueuedRecord(seq: s.nextSeq, id: r.id, json: r.json, enqueuedAt: PositionAge.origin(fix: r.time, commit: now.milliseconds)))
                s.nextSeq += 1
            }
            let excess = s.records.count - s.head - capacity
            guard excess > 0 else { return 0 }
            s.head += excess
            s.compact()
            return excess
        }
    }

    func oldest(limit: Int) throws -> [QueuedRecord] {
        state.withLock { s in Array(s.records[s.head..<min(s.records.count, s.head + limit)]) }
    }

    func remove(through seq: Int64) throws {
        state.withLock { s in
            while s.head < s.records.count, s.records[s.head].seq <= seq { s.head += 1 }
            if let f = s.inFlight, seq >= f { s.inFlight = nil }
            s.compact()
        }
    }

    func deadLetter(_ records: [QueuedRecord], status: Int, answer: String, at now: Timestamp) throws {
        // Memory mode keeps no dead letters: the sink has logged and counted them.
        guard let last = records.last?.seq else { return }
        try remove(through: last)
    }

    func dropOlder(than cutoff: Timestamp) throws -> Int {
        state.withLock { s in
            // Ages are fix times, which need not follow queue order: look at every record.
            let live = s.records[s.head...]
            guard live.contains(where: { $0.enqueuedAt < cutoff.milliseconds }) else { return 0 }
            let kept = live.filter { $0.enqueuedAt >= cutoff.milliseconds }
            let n = live.count - kept.count
            s.records = Array(kept)
            s.head = 0
            return n
        }
    }

    var depth: Int { state.withLock { $0.records.count - $0.head } }

    var inFlightThrough: Int64? { state.withLock { $0.inFlight } }

    func markInFlight(through seq: Int64) throws { state.withLock { $0.inFlight = seq } }

    var oldestEnqueuedAt: Int64? { state.withLock { s in s.records[s.head...].lazy.map(\.enqueuedAt).min() } }
}

/// Where a queued position's age (for `queue.max_age`) counts from.
enum PositionAge {
    /// The later of its fix time and its commit time. The fix time covers a device whose clock is
    /// not set yet (a Raspberry Pi without RTC commits in 1970; when NTP steps its clock, fresh
    /// fixes must not look 56 years old); the commit time covers replays of old logs and receivers
    /// whose dates are off by 1024 weeks (their fixes must not look expired on arrival).
    static func origin(fix: Int64?, commit: Int64) -> Int64 {
        max(fix ?? commit, commit)
    }
}
