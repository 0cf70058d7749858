import GatewayCore
import DeliveryEngine

/// What a step must return, when it returns something.
enum ExpectedResult: Equatable {
    case nothing
    case dropped(Int)
    case records([OutboxRecord])
    case expired(Int)
    case seq(Int64?)
}

/// The model outbox plus what surrounds it in a sink: the clock, `OutboxWriter`'s acknowledgements
/// and counters. Generation and checking run the same `apply`, so a generated step always means
/// something in the state it was generated for.
struct ModelWorld {
    var model: OutboxModel
    var now: Int64
    /// The writer's `queue.max_age` (a disk queue's option; the memory mode has none).
    let maxAge: Int64?
    /// A durable queue acknowledges each commit; a memory queue once its records left.
    let acknowledgesAtCommit: Bool
    /// Writer commits: the mark each acknowledged and the newest seq it committed.
    var commits: [(mark: UInt64, through: Int64)] = []
    var acknowledgements = 0
    /// `queue.dropped` and `queue.dead_lettered` as the writer counts them.
    var writerDropped = 0
    var deadLettered = 0

    /// The newest mark a memory queue's writer has acknowledged: that of the last commit none of
    /// whose records is still queued.
    var acknowledgedMark: UInt64? {
        guard !acknowledgesAtCommit else { return nil }
        let oldest = model.pending.first?.seq ?? .max
        return commits.last { $0.through < oldest }?.mark
    }

    mutating func apply(_ op: OutboxOp) -> ExpectedResult {
        switch op {
        case .append(let entries, let viaWriter):
            let dropped = model.append(entries, now: now)
            guard viaWriter else { return .dropped(dropped) }
            commits.append((UInt64(commits.count + 1), model.nextSeq - 1))
            if acknowledgesAtCommit { acknowledgements += 1 }
            writerDropped += dropped
            if let maxAge { writerDropped += model.dropOlder(than: now - maxAge) }
            return .nothing
        case .take(let after, let limit):
            return .records(model.records(after: after, limit: limit))
        case .removeThrough(let seq):
            model.remove(through: seq)
        case .remove(let seqs):
            model.remove(seqs)
        case .markInFlight(let seq):
            model.inFlight = seq
        case .deadLetter(let seqs, let status):
            let records = model.queued(seqs)
            model.deadLetter(records, status: status, answer: Self.answer(status), now: now)
            deadLettered += records.count
        case .dropOlder(let age):
            return .expired(model.dropOlder(than: now - age))
        case .newestSeq(let key):
            return .seq(model.newestSeq(forKey: key))
        case .advanceClock(let ms):
            now += ms
        case .crashReopen, .cleanReopen:
            break
        }
        return .nothing
    }

    /// The peer's answer stored with a dead letter.
    static func answer(_ status: Int) -> String { #"{"error":"rejected","status":"# + "\(status)}" }
}

/// Records, shown one a line with what a difference is likely to be in.
func show(_ records: [OutboxRecord]) -> String {
    records.map { r in "  \(r.seq) \(r.id) key \"\(r.key)\" age \(r.enqueuedAt) \(r.payload.count) bytes (sum \(r.payload.reduce(0) { ($0 &* 31 &+ Int($1)) & 0xFFFFFF }))" }
        .joined(separator: "\n")
}

/// The first place two record lists differ, for a failure message.
func difference(_ actual: [OutboxRecord], _ expected: [OutboxRecord]) -> String {
    let i = zip(actual, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(actual.count, expected.count)
    let window = { (r: [OutboxRecord]) in Array(r[max(0, i - 2)..<min(r.count, i + 3)]) }
    return "\(actual.count) records, the model has \(expected.count); first difference at index \(i):\n"
        + "outbox:\n\(show(window(actual)))\nmodel:\n\(show(window(expected)))"
}
