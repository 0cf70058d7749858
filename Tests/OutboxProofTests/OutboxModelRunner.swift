import Foundation
import GatewayCore
import GatewayTesting
import Locking
import DeliveryEngine

/// Which outbox a model run drives.
enum OutboxSubject: String, Sendable {
    case sqlite
    case memory
    /// A memory outbox with a planted defect: proves that a failure is found and shrunk.
    case offByOne

    var reopens: Bool { self == .sqlite }
}

/// A sink's input as `OutboxWriter` sees it: counts acknowledgements, hands out a mark per commit.
final class CountingInput: SinkInput {
    private let state = Locked<(acknowledged: Int, mark: UInt64, through: UInt64?)>((0, 0, nil))

    func next(timeout: Duration?) async -> SinkEvent { .end }
    func acknowledge() { state.withLock { $0.acknowledged += 1 } }
    var received: SinkMark { SinkMark(state.withLock { $0.mark }) }
    func acknowledge(through mark: SinkMark) { state.withLock { $0.through = max($0.through ?? 0, mark.value) } }

    /// The next commit's mark (the model numbers commits from 1).
    func receive() { state.withLock { $0.mark += 1 } }
    var acknowledgements: Int { state.withLock { $0.acknowledged } }
    var acknowledgedMark: UInt64? { state.withLock { $0.through } }
}

/// Runs steps against a real outbox and the model side by side, comparing after every step.
enum OutboxModelRunner {
    static let maxRecords = 40
    static let maxAge: Int64 = 60_000
    static let start: Int64 = 1_780_000_000_000

    static func world(_ subject: OutboxSubject) -> ModelWorld {
        ModelWorld(model: OutboxModel(maxRecords: maxRecords, keepsDeadLetters: subject == .sqlite), now: start,
                   maxAge: subject == .sqlite ? maxAge : nil, acknowledgesAtCommit: subject != .memory)
    }

    /// `count` steps from `seed`, each generated for the model state the steps before it leave.
    static func generate(seed: UInt64, count: Int, subject: OutboxSubject) -> [OutboxOp] {
        var world = world(subject)
        var generator = OutboxOpGenerator(seed: seed, reopens: subject.reopens)
        return (0..<count).map { _ in
            let op = generator.next(world.model, now: world.now)
            _ = world.apply(op)
            return op
        }
    }

    struct Failure: Error {
        /// Index of the step after which the outbox and the model disagreed.
        var step: Int
        var message: String
    }

    /// The outbox under test and what a sink puts around it.
    final class Live {
        let subject: OutboxSubject
        let directory: String
        let clock = ManualClock(start: Timestamp(milliseconds: OutboxModelRunner.start))
        let context: ComponentContext
        let input = CountingInput()
        /// Which copy of the file is open (a crash moves to a new one) and how often it was opened.
        var generation = 0
        var opens = 0
        var outbox: any Outbox
        var writer: OutboxWriter

        init(_ subject: OutboxSubject) throws {
            self.subject = subject
            directory = try makeMemoryTemporaryDirectory()
            context = SourceConformance.makeContext(id: "proof", clock: clock)
            (outbox, writer) = try Live.open(subject, path: Live.path(directory, 0), full: true, context: context)
        }

        var path: String { Live.path(directory, generation) }

        static func path(_ directory: String, _ generation: Int) -> String { directory + "/q\(generation).sqlite" }

        /// Opens the outbox (disk: synchronous `full` or normal) and a writer for it with the
        /// queue options of a sink.
        static func open(_ subject: OutboxSubject, path: String, full: Bool, context: ComponentContext) throws -> (any Outbox, OutboxWriter) {
            let (outbox, mode): (any Outbox, OutboxMode) = switch subject {
            case .sqlite: (try SQLiteOutbox(path: path, maxRecords: maxRecords, synchronousFull: full),
                           .disk(path: path, maxRecords: maxRecords, maxAge: .milliseconds(maxAge), synchronousFull: full))
            case .memory: (MemoryOutbox(capacity: maxRecords), .memory(maxRecords: maxRecords))
            case .offByOne: (OffByOneOutbox(capacity: maxRecords), .disk(path: path, maxRecords: maxRecords, maxAge: nil, synchronousFull: full))
            }
            return (outbox, OutboxWriter(outbox: outbox, mode: mode, context: context))
        }

        /// A crash leaves the file and its WAL as written (no checkpoint, no cleanup): they are
        /// copied while the outbox is open, and the copy is opened as the next start would.
        func reopen(crash: Bool) throws {
            guard subject.reopens else { return }
            let old = path
            if crash {
                generation += 1
                for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: old + suffix) {
                    try FileManager.default.copyItem(atPath: old + suffix, toPath: path + suffix)
                }
            }
            outbox.close()
            opens += 1
            (outbox, writer) = try Live.open(subject, path: path, full: opens % 2 == 0, context: context)
        }

        func finish() {
            outbox.close()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Runs `ops` on a fresh outbox; nil when it matched the model after every step.
    static func run(_ ops: [OutboxOp], subject: OutboxSubject) async -> Failure? {
        let live: Live
        do { live = try Live(subject) } catch { return Failure(step: -1, message: "cannot open: \(error)") }
        defer { live.finish() }
        var world = world(subject)
        for (step, op) in ops.enumerated() {
            do {
                if let message = try await perform(op, on: live, world: &world) ?? mismatch(live, world) {
                    return Failure(step: step, message: message)
                }
            } catch {
                return Failure(step: step, message: "threw \(error)")
            }
        }
        return nil
    }

    /// Applies `op` to both; a message when what it returned differs.
    private static func perform(_ op: OutboxOp, on live: Live, world: inout ModelWorld) async throws -> String? {
        let queued = if case .deadLetter(let seqs, _) = op { world.model.queued(seqs) } else { [OutboxRecord]() }
        let expected = world.apply(op)
        let outbox = live.outbox
        let actual: ExpectedResult
        switch op {
        case .append(let entries, let viaWriter):
            if viaWriter {
                live.input.receive()
                try await live.writer.commit(entries, acknowledging: live.input)
                actual = .nothing
            } else {
                actual = .dropped(try outbox.append(entries, at: live.clock.now()))
            }
        case .take(let after, let limit): actual = .records(try outbox.records(after: after, limit: limit))
        case .removeThrough(let seq): try outbox.remove(through: seq); actual = .nothing
        case .remove(let seqs): try outbox.remove(seqs); actual = .nothing
        case .markInFlight(let seq): try outbox.markInFlight(through: seq, durably: true); actual = .nothing
        case .deadLetter(_, let status):
            try live.writer.deadLetter(queued, status: status, answer: ModelWorld.answer(status))
            actual = .nothing
        case .dropOlder(let age): actual = .expired(try outbox.dropOlder(than: Timestamp(milliseconds: live.clock.now().milliseconds - age)))
        case .newestSeq(let key): actual = .seq(try outbox.newestSeq(forKey: key))
        case .advanceClock(let ms): live.clock.advance(by: .milliseconds(ms)); actual = .nothing
        case .crashReopen, .cleanReopen:
            var crash = false
            if case .crashReopen = op { crash = true }
            try live.reopen(crash: crash)
            // The dead letters are read beside the reopened outbox (a second connection: closing
            // it then neither checkpoints nor removes the WAL the next crash copies).
            if live.subject == .sqlite {
                let raw = try RawSQLite(path: live.path)
                defer { raw.close() }
                let found = try raw.deadLetters()
                let kept = world.model.deadLetters.values.sorted { $0.seq < $1.seq }
                if found != kept { return "dead letters after reopening differ:\n  file: \(found)\n  model: \(kept)" }
            }
            actual = .nothing
        }
        guard actual != expected else { return nil }
        switch (actual, expected) {
        case (.records(let a), .records(let e)): return "\(op) returned \(difference(a, e))"
        default: return "\(op) returned \(actual), the model \(expected)"
        }
    }

    /// The first observable difference between the outbox (and its writer) and the model.
    static func mismatch(_ live: Live, _ world: ModelWorld) throws -> String? {
        let outbox = live.outbox, model = world.model
        let all = try outbox.records(after: 0, limit: 1_000_000)
        if all != model.pending { return "queued records: \(difference(all, model.pending))" }
        if outbox.depth != model.pending.count { return "depth \(outbox.depth), the model has \(model.pending.count) records" }
        if outbox.oldestEnqueuedAt != model.oldestEnqueuedAt { return "oldestEnqueuedAt \(String(describing: outbox.oldestEnqueuedAt)), the model \(String(describing: model.oldestEnqueuedAt))" }
        if outbox.inFlightThrough != model.inFlight { return "inFlightThrough \(String(describing: outbox.inFlightThrough)), the model \(String(describing: model.inFlight))" }
        let dead = try outbox.deadLetterCount()
        if dead != model.deadLetters.count { return "deadLetterCount \(dead), the model \(model.deadLetters.count)" }
        let stats = live.context.stats
        if stats.value("queue.dropped") != world.writerDropped { return "queue.dropped \(stats.value("queue.dropped")), the model \(world.writerDropped)" }
        if stats.value("queue.dead_lettered") != world.deadLettered { return "queue.dead_lettered \(stats.value("queue.dead_lettered")), the model \(world.deadLettered)" }
        if live.input.acknowledgements != world.acknowledgements { return "\(live.input.acknowledgements) acknowledgements, the model \(world.acknowledgements)" }
        if live.input.acknowledgedMark != world.acknowledgedMark { return "acknowledged through mark \(String(describing: live.input.acknowledgedMark)), the model \(String(describing: world.acknowledgedMark))" }
        return nil
    }

    /// Drops steps (halves, then smaller chunks, then single steps) and simplifies the steps left
    /// (fewer entries, short payloads, smaller seqs) while the run still fails, until neither
    /// helps; returns the shortest failing sequence found within `budget` runs.
    static func shrink(_ ops: [OutboxOp], subject: OutboxSubject, budget: Int = 3000) async -> (ops: [OutboxOp], failure: Failure?) {
        guard var failure = await run(ops, subject: subject) else { return (ops, nil) }
        // Steps after the failing one cannot matter.
        var ops = Array(ops.prefix(failure.step + 1))
        var runs = 0
        func fails(_ candidate: [OutboxOp]) async -> Bool {
            runs += 1
            guard let f = await run(candidate, subject: subject) else { return false }
            ops = Array(candidate.prefix(f.step + 1))
            failure = f
            return true
        }
        var changed = true
        while changed && runs < budget {
            changed = false
            var chunk = max(1, ops.count / 2)
            while runs < budget {
                var i = 0
                while i < ops.count && runs < budget {
                    if await fails(Array(ops[..<i] + ops[min(ops.count, i + chunk)...])) { changed = true } else { i += chunk }
                }
                if chunk == 1 { break }
                chunk /= 2
            }
            var i = 0
            while i < ops.count && runs < budget {
                for simpler in simplifications(ops[i]) where runs < budget {
                    var candidate = ops
                    candidate[i] = simpler
                    if await fails(candidate) {
                        changed = true
                        break
                    }
                }
                i += 1
            }
        }
        return (ops, failure)
    }

    /// Simpler forms of one step, simplest first.
    static func simplifications(_ op: OutboxOp) -> [OutboxOp] {
        let smaller = { (n: Int64) in [0, n / 2, n - 1].filter { $0 >= 0 && $0 < n } }
        switch op {
        case .append(let entries, let viaWriter):
            let short = entries.map { e in OutboxEntry(id: e.id, key: e.key, payload: e.payload.count > 1 ? [UInt8(ascii: "x")] : e.payload, time: e.time) }
            return (entries.count > 1 ? entries.indices.map { i in .append(Array(entries[..<i] + entries[(i + 1)...]), viaWriter: viaWriter) } : [])
                + (short.map(\.payload) != entries.map(\.payload) ? [.append(short, viaWriter: viaWriter)] : [])
                + (viaWriter ? [.append(entries, viaWriter: false)] : [])
        case .take(let after, let limit): return smaller(after).map { .take(after: $0, limit: limit) }
        case .removeThrough(let seq): return smaller(seq).map { .removeThrough($0) }
        case .markInFlight(let seq): return smaller(seq).map { .markInFlight($0) }
        case .remove(let seqs): return seqs.indices.map { i in .remove(Array(seqs[..<i] + seqs[(i + 1)...])) }
        case .deadLetter(let seqs, let status):
            return seqs.count > 1 ? seqs.indices.map { i in .deadLetter(Array(seqs[..<i] + seqs[(i + 1)...]), status: status) } : []
        case .dropOlder(let age): return smaller(age).map { .dropOlder(age: $0) }
        case .advanceClock(let ms): return smaller(ms).map { .advanceClock(ms: $0) }
        case .crashReopen: return [.cleanReopen]
        case .newestSeq, .cleanReopen: return []
        }
    }

    /// A failure message with the minimal failing sequence, one step a line, to replay.
    static func report(seed: UInt64, length: Int, subject: OutboxSubject, failure: Failure, original: [OutboxOp]) async -> String {
        let (ops, last) = await shrink(original, subject: subject)
        let f = last ?? failure
        let steps = ops.enumerated().map { "  \($0.offset + 1). \($0.element)" }.joined(separator: "\n")
        return """
            \(subject.rawValue) outbox, seed \(seed), \(length) steps: differs from the model after step \(failure.step + 1), \(original[failure.step])
            minimal failing sequence (\(ops.count) steps):
            \(steps)
            after its last step: \(f.message)
            """
    }
}

/// A memory outbox whose `remove(through:)` removes one record too many once three are queued:
/// the defect the shrinking test must find and reduce to a few steps.
final class OffByOneOutbox: Outbox {
    private let inner: MemoryOutbox

    init(capacity: Int) { inner = MemoryOutbox(capacity: capacity) }

    var location: String { "off-by-one" }
    func append(_ entries: [OutboxEntry], at now: Timestamp) throws -> Int { try inner.append(entries, at: now) }
    func records(after seq: Int64, limit: Int) throws -> [OutboxRecord] { try inner.records(after: seq, limit: limit) }
    func remove(through seq: Int64) throws {
        let extra = inner.depth >= 3 ? try inner.records(after: seq, limit: 1).first?.seq : nil
        try inner.remove(through: extra ?? seq)
    }
    func remove(_ seqs: [Int64]) throws { try inner.remove(seqs) }
    func deadLetter(_ records: [OutboxRecord], status: Int, answer: String, at now: Timestamp) throws {
        try inner.deadLetter(records, status: status, answer: answer, at: now)
    }
    func dropOlder(than cutoff: Timestamp) throws -> Int { try inner.dropOlder(than: cutoff) }
    func newestSeq(forKey key: String) throws -> Int64? { try inner.newestSeq(forKey: key) }
    var depth: Int { inner.depth }
    var oldestEnqueuedAt: Int64? { inner.oldestEnqueuedAt }
    var inFlightThrough: Int64? { inner.inFlightThrough }
    func markInFlight(through seq: Int64, durably: Bool) throws { try inner.markInFlight(through: seq, durably: durably) }
    func deadLetterCount() throws -> Int { 0 }
    func close() {}
}
