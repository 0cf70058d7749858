import Foundation
import GatewayCore
import GatewayTesting
import Locking
import DeliveryEngine
import Testing

/// The SQLite outbox under simulated power cuts. On ``PowerCutVFS``, a seeded run of a sink at
/// work (appends, some past `max_records`, acknowledgements in and out of order, dead letters,
/// in-flight marks, expiry of records in and out of age order, clean restarts), then of steady delivery long enough for SQLite's automatic checkpoint, is cut before
/// every write, truncate, sync, create and delete. Each image a cut leaves is opened as the next
/// start would open it (the normal VFS, the real `SQLiteOutbox`) and must hold every record whose
/// append had returned (upstream was told it is safe) unless its removal had returned, no record
/// whose removal had returned, nothing never appended, be the queue (its records and its in-flight
/// mark) as a whole number of steps left it (each step is one transaction), and pass `PRAGMA
/// integrity_check`. With `synchronous` full, a removal is not synced (SQLiteOutbox says why): a
/// power cut may undo removals, never a step that syncs (an append, a dead letter, a durable
/// mark), so removed records may be back but nothing acknowledged is lost. What each setting
/// survives is printed, and written in Plugins/HTTPOutput/README.md.
@Suite(.serialized) struct PowerCutTests {
    /// Steps of the sink at work (times LOCGATE_PROOF_SCALE).
    static let steps = 90
    /// The queue's `max_records`: the run's queue outgrows it now and then.
    static let maxRecords = 24

    /// What happened to one record: the steps its append and its removal happened in.
    struct History {
        var id: String
        var payload: [UInt8]
        /// Its age origin (``OutboxAge``): what expiry compares.
        var origin: Int64
        var appended: Int
        var removed: Int?
    }

    /// Every record of the run, what is queued now, and which records each step appended and
    /// removed: an image is checked against it in time proportional to the queue, not the run.
    struct Ledger {
        var history: [Int64: History] = [:]
        var queued: [Int64] = []
        var appendedAt: [Int: [Int64]] = [:]
        var removedAt: [Int: [Int64]] = [:]
        /// The in-flight mark after each step (index: the step).
        var marks: [Int64?] = []
        /// Steps whose write syncs with `synchronous` full, ascending.
        var synced: [Int] = []

        /// The last step before `step` that synced; 0 (the open) when none.
        func lastSynced(before step: Int) -> Int {
            synced.last { $0 < step } ?? 0
        }

        mutating func append(_ seq: Int64, _ entry: OutboxEntry, origin: Int64, step: Int) {
            history[seq] = History(id: entry.id, payload: entry.payload, origin: origin, appended: step)
            queued.append(seq)
            appendedAt[step, default: []].append(seq)
        }

        mutating func remove(_ seqs: Set<Int64>, step: Int) {
            for seq in seqs where history[seq]?.removed == nil {
                history[seq]?.removed = step
                removedAt[step, default: []].append(seq)
            }
            queued.removeAll { seqs.contains($0) }
        }
    }

    /// What the images of one kind showed.
    struct Tally {
        var images = 0
        var lost = 0, imagesLosing = 0
        var back = 0, imagesBringingBack = 0
        var damaged = 0
        var foreign = 0
        /// Images that are not the state after any prefix of the steps (part of a step, a gap).
        var partial = 0
        /// The most steps that had returned and were undone in one image.
        var stepsUndone = 0
        /// Images that undid a step that synced (had returned before the cut).
        var syncedUndone = 0
        var examples: [String] = []

        var summary: String {
            "\(images) images: \(lost) acknowledged records lost (in \(imagesLosing)), \(back) removed records back (in \(imagesBringingBack)), \(damaged) damaged, \(foreign) with records never appended or changed, \(partial) not after a prefix of the steps; at most \(stepsUndone) returned steps undone, \(syncedUndone) undoing a synced one"
        }

        mutating func note(_ example: String) { if examples.count < 5 { examples.append(example) } }
    }

    struct Measurement {
        var cutPoints = 0
        var steps = 0
        /// Records dropped past `max_records` (in the append's transaction), and expired.
        var droppedOverLimit = 0, expired = 0
        /// Records committed out of age order (`late`, found by the partial index).
        var late = 0
        /// WAL headers written in steady delivery (restarts of the WAL after a checkpoint).
        var walRestarts = 0
        var kinds: [PowerCutVFS.CutImage.Kind: Tally] = [:]

        func report(_ synchronous: String) -> String {
            (["synchronous=\(synchronous): \(steps) steps, \(cutPoints) cut points (writes, truncates, syncs, creates, deletes), \(kinds[.powerLoss]?.images ?? 0) of them cut and checked; \(walRestarts) WAL restart(s) in steady delivery; \(droppedOverLimit) record(s) dropped past max_records, \(expired) expired, \(late) committed out of age order"]
                + PowerCutVFS.CutImage.Kind.allCases.map { "  \($0.rawValue): \(kinds[$0]?.summary ?? "no images")" })
                .joined(separator: "\n")
        }
    }

    /// Runs the seeded workload with `synchronous` full or normal and checks the images of every cut point.
    static func measure(full: Bool, seed: UInt64) throws -> Measurement {
        let vfs = PowerCutVFS(name: "locgate-power-cut-\(full ? "full" : "normal")")
        defer { vfs.unregister() }
        let directory = try makeMemoryTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let checking = directory + "/check"
        try FileManager.default.createDirectory(atPath: checking, withIntermediateDirectories: true)
        let path = directory + "/q.sqlite"
        var rng = SeededGenerator(seed: seed)
        var ledger = Ledger()
        var nextSeq: Int64 = 1
        var measurement = Measurement()
        vfs.capture { _, _ in true }

        func check(step: Int) {
            for image in vfs.takeImages() {
                var tally = measurement.kinds[image.kind] ?? Tally()
                examine(image, in: checking, step: step, ledger: ledger, tally: &tally)
                measurement.kinds[image.kind] = tally
            }
        }

        func payload(_ size: Int) -> [UInt8] { (0..<size).map { _ in UInt8.random(in: 32...126, using: &rng) } }
        // The clock: one millisecond a step.
        func now(_ step: Int) -> Int64 { 1_780_000_000_000 + Int64(step) }
        var newestOrigin = Int64.min
        func append(_ entries: [OutboxEntry], step: Int) throws {
            let dropped = try outbox.append(entries, at: Timestamp(milliseconds: now(step)))
            for e in entries {
                let origin = OutboxAge.origin(fix: e.time, commit: now(step))
                if origin < newestOrigin { measurement.late += 1 }
                newestOrigin = max(newestOrigin, origin)
                ledger.append(nextSeq, e, origin: origin, step: step)
                nextSeq += 1
            }
            // Past the limit the oldest go, in the same transaction.
            let over = max(0, ledger.queued.count - PowerCutTests.maxRecords)
            ledger.remove(Set(ledger.queued.prefix(over)), step: step)
            measurement.droppedOverLimit += over
            #expect(dropped == over, "step \(step): dropped \(dropped) past max_records, expected \(over)")
        }
        func removeFront(through seq: Int64, step: Int) throws {
            try outbox.remove(through: seq)
            ledger.remove(Set(ledger.queued.filter { $0 <= seq }), step: step)
        }
        // After each step: its mark, and whether it synced.
        func settle(step: Int, synced: Bool) {
            ledger.marks.append(outbox.inFlightThrough)
            if synced { ledger.synced.append(step) }
        }

        // Step 0 opens the queue (the file, the WAL, the schema), as a sink's start does.
        let open = { try SQLiteOutbox(path: path, maxRecords: PowerCutTests.maxRecords, synchronousFull: full, vfs: vfs.name) }
        var outbox = try open()
        settle(step: 0, synced: true)
        check(step: 0)
        var step = 0
        // A sink at work: positions in, acknowledgements in and out of order, restarts.
        for _ in 0..<(PowerCutTests.steps * ProofScale.factor) {
            step += 1
            let roll = Int.random(in: 0..<100, using: &rng)
            var synced = false
            switch roll {
            case ..<45:
                synced = true
                try append((0..<Int.random(in: 1...4, using: &rng)).map { _ in
                    let size = Int.random(in: 0..<15, using: &rng) == 0 ? Int.random(in: 3000...6000, using: &rng) : Int.random(in: 60...400, using: &rng)
                    // Some fixes are stamped ahead of the clock: their age starts later, and the
                    // records after them are out of age order.
                    let time = Int.random(in: 0..<4, using: &rng) == 0 ? now(step) + Int64.random(in: 1...20, using: &rng) : nil
                    return OutboxEntry(id: "p\(nextSeq)", key: ["", "a", "b"][Int.random(in: 0..<3, using: &rng)], payload: payload(size), time: time)
                }, step: step)
            case ..<65 where !ledger.queued.isEmpty:
                // The front acknowledged, as the http sink does; half the time with the next
                // batch's mark in the same write, synced (a partial batch) or not (a full one).
                let through = ledger.queued[min(ledger.queued.count, Int.random(in: 1...5, using: &rng)) - 1]
                if roll < 55 {
                    try removeFront(through: through, step: step)
                } else {
                    synced = roll < 60
                    let next = ledger.queued.last { $0 > through } ?? through
                    try outbox.remove(through: through, markingInFlight: next, durably: synced)
                    ledger.remove(Set(ledger.queued.filter { $0 <= through }), step: step)
                }
            case ..<80 where !ledger.queued.isEmpty:
                // Out of order, as a broker acknowledges; or rejected into the dead letters.
                let picked = Set((0..<Int.random(in: 1...4, using: &rng)).map { _ in ledger.queued[Int.random(in: 0..<ledger.queued.count, using: &rng)] })
                if roll < 75 {
                    try outbox.remove(Array(picked))
                } else {
                    let records = try outbox.oldest(limit: 1_000_000).filter { picked.contains($0.seq) }
                    try outbox.deadLetter(records, status: 400, answer: "rejected", at: Timestamp(milliseconds: 0))
                    synced = true
                }
                ledger.remove(picked, step: step)
            case ..<88 where !ledger.queued.isEmpty:
                synced = roll < 84
                try outbox.markInFlight(through: ledger.queued[Int.random(in: 0..<ledger.queued.count, using: &rng)], durably: synced)
            case ..<92 where !ledger.queued.isEmpty:
                // Expiry (`max_age`): what is older than the cutoff goes, in and out of age order.
                let cutoff = now(step) - Int64.random(in: 0...12, using: &rng)
                let expired = Set(ledger.queued.filter { ledger.history[$0]!.origin < cutoff })
                let n = try outbox.dropOlder(than: Timestamp(milliseconds: cutoff))
                #expect(n == expired.count, "step \(step): \(n) expired, expected \(expired.count)")
                ledger.remove(expired, step: step)
                measurement.expired += n
                synced = n > 0
            case ..<96:
                outbox.close()
                outbox = try open()
                synced = true
            default:
                _ = try outbox.oldest(limit: 10)
            }
            settle(step: step, synced: synced)
            check(step: step)
        }
        // Steady delivery: each batch is taken by the server soon after it was queued, with no
        // restart for long enough that SQLite's automatic checkpoint (at 1000 WAL pages) runs and
        // the WAL starts again from its beginning. A WAL near 4 MB makes each image costly, so
        // here the checkpoint (the database file's writes and syncs) and the WAL's restart with
        // the 60 cut points after it are cut at each point, the rest at every 10th sync and
        // every 50th write.
        let focus = Locked(0)
        vfs.capture { point, call in
            switch call {
            case .write(let path, let offset, _) where path.hasSuffix("-wal"):
                if offset == 0 { focus.withLock { $0 = point + 60 } }
                return point <= focus.withLock { $0 } || point % 50 == 0
            case .sync(let path) where path.hasSuffix("-wal"):
                return point <= focus.withLock { $0 } || point % 10 == 0
            default:
                return true
            }
        }
        // One restart (and a few commits after it), one more for every other unit of LOCGATE_PROOF_SCALE.
        let headers = vfs.walHeaderWrites, restarts = max(1, ProofScale.factor / 2)
        var afterRestart = 6
        while afterRestart > 0 && step < 1_000_000 {
            step += 1
            let appending = ledger.queued.isEmpty || step % 2 == 0
            if appending {
                try append((0..<Int.random(in: 1...3, using: &rng)).map { _ in
                    OutboxEntry(id: "p\(nextSeq)", payload: payload(Int.random(in: 60...400, using: &rng)), time: nil)
                }, step: step)
            } else {
                try removeFront(through: ledger.queued[ledger.queued.count - 1], step: step)
            }
            settle(step: step, synced: appending)
            check(step: step)
            if vfs.walHeaderWrites - headers >= restarts { afterRestart -= 1 }
        }
        measurement.walRestarts = vfs.walHeaderWrites - headers
        // The last step: a clean close (its checkpoint, the WAL's truncation and removal).
        #expect(try outbox.oldest(limit: 1_000_000).map(\.seq) == ledger.queued, "the run itself lost track")
        outbox.close()
        step += 1
        ledger.marks.append(ledger.marks.last ?? nil)
        ledger.synced.append(step)
        check(step: step)
        measurement.steps = step
        measurement.cutPoints = vfs.callCount
        return measurement
    }

    /// Writes the image's files, opens them as the next start would, and tallies what is wrong.
    static func examine(_ image: PowerCutVFS.CutImage, in directory: String, step: Int, ledger: Ledger, tally: inout Tally) {
        tally.images += 1
        let at = "cut \(image.point) (before \(image.call), step \(step), \(image.kind.rawValue))"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
        for (path, bytes) in image.files {
            _ = FileManager.default.createFile(atPath: directory + "/" + (path.split(separator: "/").last.map(String.init) ?? path), contents: Data(bytes))
        }
        let db = directory + "/q.sqlite"
        var found: [OutboxRecord] = []
        var mark: Int64?
        do {
            let outbox = try SQLiteOutbox(path: db, maxRecords: 1_000_000, synchronousFull: false)
            found = try outbox.oldest(limit: 1_000_000)
            mark = outbox.inFlightThrough
            outbox.close()
            let raw = try RawSQLite(path: db)
            defer { raw.close() }
            let integrity = try raw.integrityCheck()
            if integrity != "ok" {
                tally.damaged += 1
                tally.note("\(at): integrity_check: \(integrity)")
            }
        } catch {
            tally.damaged += 1
            tally.note("\(at): \(error)")
            return
        }
        var back: [Int64] = [], foreign: [Int64] = []
        let present = Dictionary(found.map { ($0.seq, $0) }, uniquingKeysWith: { a, _ in a })
        let history = ledger.history
        // Still queued after the step that was cut, and appended before it: its append had returned.
        let lost = ledger.queued.filter { history[$0]!.appended < step && present[$0] == nil }
        for r in found {
            guard let h = history[r.seq], h.id == r.id, h.payload == r.payload else { foreign.append(r.seq); continue }
            if let removed = h.removed, removed < step { back.append(r.seq) }
        }
        // Each step is one transaction (an append, a remove, a dead letter): what is left must be
        // the state after some prefix of the steps, never part of one (nor a gap in the order).
        if let p = prefix(matching: Set(present.keys), mark: mark, ledger: ledger, step: step) {
            tally.stepsUndone = max(tally.stepsUndone, step - 1 - p)
            let synced = ledger.lastSynced(before: step)
            if p < synced {
                tally.syncedUndone += 1
                tally.note("\(at): the state after step \(p), undoing step \(synced), which synced")
            }
        } else {
            tally.partial += 1
            tally.note("\(at): not the state after any prefix of the steps: \(present.keys.sorted()), mark \(mark.map(String.init) ?? "none")")
        }
        if !lost.isEmpty {
            tally.lost += lost.count
            tally.imagesLosing += 1
            tally.note("\(at): acknowledged records lost: \(lost.sorted())")
        }
        if !back.isEmpty {
            tally.back += back.count
            tally.imagesBringingBack += 1
            tally.note("\(at): removed records back: \(back.sorted())")
        }
        if !foreign.isEmpty {
            tally.foreign += 1
            tally.note("\(at): records never appended or changed: \(foreign.sorted())")
        }
    }

    /// The latest step p (up to the one cut, as if it had completed) such that `present` is
    /// exactly what steps 1...p leave queued and `mark` the in-flight mark they leave; nil when
    /// there is none.
    static func prefix(matching present: Set<Int64>, mark: Int64?, ledger: Ledger, step: Int) -> Int? {
        var expected = Set(ledger.queued)
        // Walking back from p = step: undo step p's appends and removals; `differing` counts the
        // seqs in exactly one of `expected` and `present`.
        var differing = expected.symmetricDifference(present).count
        func flip(_ seq: Int64, into: Bool) {
            let before = expected.contains(seq) != present.contains(seq)
            if into { expected.insert(seq) } else { expected.remove(seq) }
            differing += (expected.contains(seq) != present.contains(seq) ? 1 : 0) - (before ? 1 : 0)
        }
        for p in stride(from: step, through: 0, by: -1) {
            // The step cut had not returned: its mark is not in the ledger yet.
            let markAfter = p < ledger.marks.count ? ledger.marks[p] : nil
            if differing == 0 && (p >= ledger.marks.count || markAfter == mark) { return p }
            for seq in ledger.appendedAt[p] ?? [] { flip(seq, into: false) }
            for seq in ledger.removedAt[p] ?? [] { flip(seq, into: true) }
        }
        return nil
    }

    /// Full: nothing acknowledged is lost at any cut, and no step that synced is undone. A power
    /// cut may undo the removals since the last sync (they are not synced): that is asserted too,
    /// as the proof that the test sees removals come back (and that they are not synced, which
    /// is what keeps fsyncs off the delivering path).
    @Test(.timeLimit(.minutes(ProofScale.minutes))) func synchronousFullLosesNothingAcknowledgedAtAnyCut() throws {
        let m = try Self.measure(full: true, seed: 0xF011)
        print(m.report("full"))
        #expect(m.walRestarts >= 1, "steady delivery never reached SQLite's automatic checkpoint")
        #expect(m.droppedOverLimit > 0 && m.expired > 0 && m.late > 0, "the run never dropped past max_records, expired or went out of age order: \(m.report(""))")
        for kind in PowerCutVFS.CutImage.Kind.allCases {
            let t = try #require(m.kinds[kind], "no \(kind.rawValue) images")
            #expect(t.lost == 0 && t.damaged == 0 && t.foreign == 0 && t.partial == 0 && t.syncedUndone == 0, "\(kind.rawValue): \(t.summary)\n\(t.examples.joined(separator: "\n"))")
        }
        for kind in [PowerCutVFS.CutImage.Kind.processCrash, .processCrashTorn] {
            let t = try #require(m.kinds[kind])
            #expect(t.back == 0 && t.stepsUndone == 0, "\(kind.rawValue): \(t.summary)\n\(t.examples.joined(separator: "\n"))")
        }
        #expect((m.kinds[.powerLoss]?.back ?? 0) > 0, "a power cut under synchronous=full brought no removed record back: removals are synced again?")
    }

    /// Normal keeps the file sound and survives the crash of the process, but a power cut takes
    /// the commits since the last checkpoint: they were never synced. That loss is asserted too,
    /// as the proof that the VFS really forgets what was not synced.
    @Test(.timeLimit(.minutes(ProofScale.minutes))) func synchronousNormalSurvivesAProcessCrashButNotAPowerCut() throws {
        let m = try Self.measure(full: false, seed: 0xF011)
        print(m.report("normal"))
        #expect(m.walRestarts >= 1, "steady delivery never reached SQLite's automatic checkpoint")
        #expect(m.droppedOverLimit > 0 && m.expired > 0 && m.late > 0, "the run never dropped past max_records, expired or went out of age order: \(m.report(""))")
        for kind in PowerCutVFS.CutImage.Kind.allCases {
            let t = try #require(m.kinds[kind], "no \(kind.rawValue) images")
            #expect(t.damaged == 0 && t.foreign == 0 && t.partial == 0, "\(kind.rawValue): \(t.summary)\n\(t.examples.joined(separator: "\n"))")
        }
        for kind in [PowerCutVFS.CutImage.Kind.processCrash, .processCrashTorn] {
            let t = try #require(m.kinds[kind])
            #expect(t.lost == 0 && t.back == 0, "\(kind.rawValue): \(t.summary)\n\(t.examples.joined(separator: "\n"))")
        }
        #expect((m.kinds[.powerLoss]?.lost ?? 0) > 0, "a power cut under synchronous=normal lost nothing: the VFS does not forget unsynced writes")
    }
}
