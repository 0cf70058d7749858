import GatewayCore
import GatewayTesting
import DeliveryEngine

/// One step of a model-based run. Steps are plain values (seqs, not records) so that any
/// subsequence of a run is still a valid run: a failing sequence can be shrunk by dropping steps
/// and printed to be replayed.
enum OutboxOp: CustomStringConvertible, Sendable {
    /// Commits entries, through `OutboxWriter.commit` (acknowledgement, caps, `max_age`) or `Outbox.append`.
    case append([OutboxEntry], viaWriter: Bool)
    /// `records(after:limit:)`, the sender's read (`after: 0` is `oldest(limit:)`).
    case take(after: Int64, limit: Int)
    case removeThrough(Int64)
    /// Out-of-order acknowledgements; may name unknown and repeated seqs.
    case remove([Int64])
    case markInFlight(Int64)
    /// Dead-letters (through the writer) those of these seqs still queued: a sender passes records it read.
    case deadLetter([Int64], status: Int)
    /// `dropOlder(than: now - age)`.
    case dropOlder(age: Int64)
    case newestSeq(key: String)
    case advanceClock(ms: Int64)
    /// The process dies: the SQLite file and its WAL, as written, are opened again (disk only).
    case crashReopen
    /// `close()` and open again (disk only).
    case cleanReopen

    var description: String {
        switch self {
        case .append(let entries, let viaWriter):
            let shown = entries.map { e in
                let text = e.payload.count <= 24 && e.payload.allSatisfy({ (32..<127).contains($0) })
                    ? "\"\(String(decoding: e.payload, as: UTF8.self))\"" : "\(e.payload.count) bytes"
                return "\(e.id)[key \"\(e.key)\", \(text), fix \(e.time.map(String.init) ?? "nil")]"
            }
            return "\(viaWriter ? "writer.commit" : "append")(\(shown.joined(separator: ", ")))"
        case .take(let after, let limit): return "records(after: \(after), limit: \(limit))"
        case .removeThrough(let seq): return "remove(through: \(seq))"
        case .remove(let seqs): return "remove(\(seqs))"
        case .markInFlight(let seq): return "markInFlight(through: \(seq))"
        case .deadLetter(let seqs, let status): return "deadLetter(\(seqs), status: \(status))"
        case .dropOlder(let age): return "dropOlder(than: now - \(age) ms)"
        case .newestSeq(let key): return "newestSeq(forKey: \"\(key)\")"
        case .advanceClock(let ms): return "clock += \(ms) ms"
        case .crashReopen: return "crash and reopen"
        case .cleanReopen: return "close and reopen"
        }
    }
}

/// A dead letter as the SQLite outbox keeps it (its table has no key column).
struct ModelDeadLetter: Equatable, CustomStringConvertible {
    var seq: Int64
    var id: String
    var payload: [UInt8]
    var enqueuedAt: Int64
    var failedAt: Int64
    var status: Int64
    var answer: String

    var description: String { "dead \(seq) \(id) (\(payload.count) bytes, enqueued \(enqueuedAt), failed \(failedAt), \(status) \(answer))" }
}

/// What an outbox must be, written as plainly as possible: an array in seq order and a counter.
/// Every rule here is one sentence of the `Outbox` protocol's contract.
struct OutboxModel {
    let maxRecords: Int
    /// The SQLite outbox keeps dead letters; the memory outbox keeps none.
    let keepsDeadLetters: Bool
    var pending: [OutboxRecord] = []
    var nextSeq: Int64 = 1
    var inFlight: Int64?
    var deadLetters: [Int64: ModelDeadLetter] = [:]

    /// Appends in order with fresh seqs; beyond `maxRecords` the oldest go (and the in-flight mark
    /// with them: the batch it names may be gone). Returns how many were dropped.
    mutating func append(_ entries: [OutboxEntry], now: Int64) -> Int {
        for e in entries {
            pending.append(OutboxRecord(seq: nextSeq, id: e.id, key: e.key, payload: e.payload,
                                        enqueuedAt: max(e.time ?? now, now)))
            nextSeq += 1
        }
        let excess = pending.count - maxRecords
        guard excess > 0 else { return 0 }
        pending.removeFirst(excess)
        inFlight = nil
        return excess
    }

    func records(after seq: Int64, limit: Int) -> [OutboxRecord] {
        Array(pending.filter { $0.seq > seq }.prefix(limit))
    }

    mutating func remove(through seq: Int64) {
        pending.removeAll { $0.seq <= seq }
        if let f = inFlight, seq >= f { inFlight = nil }
    }

    mutating func remove(_ seqs: [Int64]) {
        let gone = Set(seqs)
        pending.removeAll { gone.contains($0.seq) }
    }

    /// The records of `seqs` still queued, in queue order: what a sender would pass.
    func queued(_ seqs: [Int64]) -> [OutboxRecord] {
        let wanted = Set(seqs)
        return pending.filter { wanted.contains($0.seq) }
    }

    mutating func deadLetter(_ records: [OutboxRecord], status: Int, answer: String, now: Int64) {
        guard let last = records.map(\.seq).max() else { return }
        if keepsDeadLetters {
            for r in records {
                deadLetters[r.seq] = ModelDeadLetter(seq: r.seq, id: r.id, payload: r.payload, enqueuedAt: r.enqueuedAt,
                                                     failedAt: now, status: Int64(status), answer: answer)
            }
        }
        remove(records.map(\.seq))
        if let f = inFlight, last >= f { inFlight = nil }
    }

    /// Ages need not follow queue order: every record is looked at.
    mutating func dropOlder(than cutoff: Int64) -> Int {
        let before = pending.count
        pending.removeAll { $0.enqueuedAt < cutoff }
        let n = before - pending.count
        if n > 0 { inFlight = nil }
        return n
    }

    func newestSeq(forKey key: String) -> Int64? { pending.last { $0.key == key }?.seq }

    var oldestEnqueuedAt: Int64? { pending.map(\.enqueuedAt).min() }
}

/// Random steps that mostly make sense for the model's current state (seqs that are queued,
/// ages around the cutoff), and sometimes do not (unknown seqs, empty batches).
struct OutboxOpGenerator {
    var rng: SeededGenerator
    let reopens: Bool
    private var nextID = 0

    init(seed: UInt64, reopens: Bool) {
        rng = SeededGenerator(seed: seed)
        self.reopens = reopens
    }

    private mutating func pick(_ n: Int) -> Int { Int.random(in: 0..<n, using: &rng) }

    /// A seq near the queue: queued (mostly), just below or above it, or 0.
    private mutating func seq(_ model: OutboxModel) -> Int64 {
        if !model.pending.isEmpty && pick(10) < 7 { return model.pending[pick(model.pending.count)].seq }
        return Int64.random(in: 0...(model.nextSeq + 2), using: &rng)
    }

    private mutating func payload() -> [UInt8] {
        switch pick(20) {
        case 0: return []
        // Overflow pages in SQLite.
        case 1: return (0..<5000).map { _ in UInt8.random(in: 32...126, using: &rng) }
        // Any bytes: the outbox stores payloads as TEXT and must hand back exactly what it was given.
        case 2: return (0..<pick(64)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        default:
            let text = #"{"id":"#  + "\(pick(1_000_000))" + #","lat":"# + "\(pick(90)).\(pick(100_000))" + ",\"d\":\"é\"}"
            return Array(text.utf8)
        }
    }

    private mutating func entries(now: Int64) -> [OutboxEntry] {
        let count = pick(12) == 0 ? 0 : 1 + pick(6)
        return (0..<count).map { _ in
            nextID += 1
            // Ids need not be unique (a device resends): sometimes repeat one.
            let id = pick(8) == 0 ? "p\(max(1, nextID - 1 - pick(5)))" : "p\(nextID)"
            let time: Int64? = switch pick(3) {
            case 0: nil
            case 1: now - Int64(pick(100_000))
            default: now + Int64(pick(100_000))
            }
            return OutboxEntry(id: id, key: ["", "a", "b", "c/d"][pick(4)], payload: payload(), time: time)
        }
    }

    mutating func next(_ model: OutboxModel, now: Int64) -> OutboxOp {
        let roll = pick(100)
        switch roll {
        case ..<30:
            return .append(entries(now: now), viaWriter: pick(2) == 0)
        case ..<42:
            let after: Int64 = pick(3) == 0 ? 0 : seq(model)
            return .take(after: after, limit: pick(4) == 0 ? 1000 : pick(11))
        case ..<52:
            return .removeThrough(seq(model))
        case ..<62:
            var seqs = (0..<pick(6)).map { _ in seq(model) }
            if let s = seqs.first, pick(3) == 0 { seqs.append(s) }
            return .remove(seqs)
        case ..<67:
            return .markInFlight(seq(model))
        case ..<73:
            return .deadLetter((0..<(1 + pick(3))).map { _ in seq(model) }, status: [400, 404, 413][pick(3)])
        case ..<78:
            return .dropOlder(age: Int64(pick(120_000)))
        case ..<83:
            return .newestSeq(key: ["", "a", "b", "c/d", "e"][pick(5)])
        case ..<94:
            return .advanceClock(ms: Int64(pick(20_000)))
        case ..<97 where reopens:
            return .crashReopen
        case ..<99 where reopens:
            return .cleanReopen
        default:
            return .take(after: 0, limit: pick(5))
        }
    }
}
