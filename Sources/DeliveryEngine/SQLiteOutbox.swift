import Dispatch
import GatewayCore
import Locking
import Synchronization
import SystemIO
#if canImport(Glibc)
import Glibc
import SQLiteStorage
import EnvironmentChecks
#endif

/// An outbox in an SQLite file (WAL mode), one file per sink, through ``SQLiteConnection``
/// (SQLiteConnection.swift, the one file that talks to SQLite's C API).
///
/// Tables: `pending` (seq autoincrement, position id, key, payload, age origin, `late`) and `dead_letters`
/// (the same plus the peer's status and answer), `meta` (the in-flight mark). The payload is what
/// the sink sends (an http record in its body format, an MQTT message, a COPY line). A record is deleted
/// from `pending` only after the peer accepted it, so a restart resumes where the last run stopped.
///
/// The WAL stays bounded: every statement is reset as soon as its rows are read (an open read
/// statement pins the WAL and no checkpoint can complete behind it), SQLite's automatic
/// checkpoint (every 1000 pages, ~4 MB) then recycles it, and `journal_size_limit` truncates it
/// back after a burst. ``close()`` checkpoints and closes, which deletes the WAL file.
///
/// Two connections: writes (commits, deletes, marks, dead letters) go through one, the reads of
/// a delivering loop (``records(after:limit:)``, ``newestSeq(forKey:)``) through the other, each
/// under its own lock. A write holds its lock through its COMMIT's fsync (milliseconds, far more
/// on a slow card); a loop that read through the same connection waited for it on the pipeline's
/// thread, and every source and transform there with it. In WAL mode a reader sees the last
/// committed state (a commit becomes visible only after its WAL sync), without waiting.
///
/// What waits for the disk: with `synchronous` full, a commit of positions (``append(_:at:)``),
/// a move to the dead letters, expiry, and an in-flight mark asked to be durable sync the WAL
/// before they return. A removal of delivered records does not (`PRAGMA synchronous=NORMAL` for
/// its transaction): it is written to the operating system, so it survives a crash of the
/// process, and the next synced commit makes it durable with everything before it — the WAL is a
/// log, and a sync of it covers every frame written before. A power cut in between leaves the
/// queue as some earlier transaction left it (never part of one: `Tests/OutboxProofTests`), so
/// delivered records can come back and go again, as after a crash between a delivery and its
/// delete; nothing acknowledged upstream is lost. Syncing each removal cost the http sink one
/// fsync per batch on its delivering path (on an SD card, milliseconds each).
public final class SQLiteOutbox: Outbox {
    public let path: String
    public let maxRecords: Int
    /// `PRAGMA synchronous` for writes that must reach the disk (`FULL` or `NORMAL`, the queue's setting).
    private let durableLevel: String
    /// Guards `connection`: the sink's receiving and delivering tasks share it.
    private let lock = Locked(())
    // Only touched inside `run`, under `lock`; nil once closed.
    nonisolated(unsafe) private var connection: SQLiteConnection?
    /// Guards `reader`, the connection reads go through; nil once closed.
    private let readLock = Locked(())
    nonisolated(unsafe) private var reader: SQLiteConnection?
    private let cachedDepth = Atomic<Int>(0)
    private let cachedOldest = Locked<Int64?>(nil)
    /// The age origin of the newest record committed in queue order (`late` 0), nil when none:
    /// a record younger than this goes in late. Only touched inside `run`, under `lock`.
    nonisolated(unsafe) private var inOrderAge: Int64?
    /// No record before this seq is in queue order (`late` 0): where the search for the first one
    /// starts, so that a long run of late records at the front is walked once, not at every
    /// removal. Only touched inside `run`, under `lock`.
    nonisolated(unsafe) private var inOrderFrom: Int64 = 0
    private let cachedInFlight = Locked<Int64?>(nil)
    /// The thread commits and background removals run on (``commit(_:at:)``,
    /// ``remove(_:done:)``), one per outbox: never the pipeline's nor a delivering loop's.
    private let commits: DispatchQueue

    public var location: String { path }

    /// Opens (or creates) the outbox file and proves it is writable.
    public convenience init(path: String, maxRecords: Int, synchronousFull: Bool) throws {
        try self.init(path: path, maxRecords: maxRecords, synchronousFull: synchronousFull, vfs: nil)
    }

    /// The same through the SQLite VFS registered as `vfs`: OutboxProofTests simulates power cuts.
    package init(path: String, maxRecords: Int, synchronousFull: Bool, vfs: String?) throws {
        self.path = path
        self.maxRecords = maxRecords
        durableLevel = synchronousFull ? "FULL" : "NORMAL"
        commits = DispatchQueue(label: "locgate-outbox")
        try SQLiteOutbox.checkDirectory(of: path)
        do {
            let c = try SQLiteConnection(path: path, vfs: vfs)
            try SQLiteOutbox.checkSchema(c, path: FileCheck.absolute(path))
            try c.execute("PRAGMA journal_mode=WAL")
            try c.setSynchronous(durableLevel)
            // After a checkpoint, a WAL that grew past this is truncated back (a burst or a long outage).
            try c.execute("PRAGMA journal_size_limit=\(4 << 20)")
            try SQLiteOutbox.createOrUpgradeTables(c)
            cachedDepth.store(Int(try c.queryInt("SELECT count(*) FROM pending") ?? 0), ordering: .relaxed)
            try refreshOldest(c)
            inOrderAge = try c.queryInt("SELECT enqueued_ms FROM pending WHERE NOT late ORDER BY seq DESC LIMIT 1")
            try cachedInFlight.withLock { $0 = try c.queryInt("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'in_flight'") }
            connection = c
            // Opened once the schema exists. Read-write (a read-only connection cannot always
            // open a WAL file), but it only reads; never created (see `create`).
            let r = try SQLiteConnection(path: path, create: false, vfs: vfs)
            try r.execute("PRAGMA query_only=1")
            reader = r
        } catch let e as SQLiteError {
            throw OutboxError(path: FileCheck.absolute(path), message: e.message, isDiskFull: e.isDiskFull)
        }
    }

    // No work item of this outbox is left when it deinitialises (each holds it): nothing to wait for.
    deinit { closeConnection() }

    public func close() {
        // Commits and removals handed to the outbox's thread finish first (a loop cancelled at the
        // shutdown deadline may have left a removal of acknowledged records there).
        commits.sync {}
        closeConnection()
    }

    private func closeConnection() {
        // The reader first: closing the last connection is what deletes the WAL file.
        readLock.withLock { _ in
            reader?.close()
            reader = nil
        }
        lock.withLock { _ in
            guard let c = connection else { return }
            // TRUNCATE leaves an empty WAL; closing the last connection then deletes it.
            try? c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            c.close()
            connection = nil
        }
    }

    public var inFlightThrough: Int64? { cachedInFlight.withLock { $0 } }

    public func markInFlight(through seq: Int64, durably: Bool) throws {
        // Written again when it must be durable: the same mark may be in the WAL unsynced.
        if !durably && cachedInFlight.withLock({ $0 }) == seq { return }
        try run { c in
            try synchronous(c, durable: durably)
            try c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('in_flight', '\(seq)')")
            cachedInFlight.withLock { $0 = seq }
        }
    }

    /// Deletes the in-flight mark, inside the caller's transaction (rows of the batch it names
    /// were dropped: a resend after a restart cannot be the same batch); true when there was one,
    /// and the caller forgets the cached mark after its COMMIT.
    private func forgetInFlight(_ c: SQLiteConnection) throws -> Bool {
        guard cachedInFlight.withLock({ $0 }) != nil else { return false }
        try c.execute("DELETE FROM meta WHERE key = 'in_flight'")
        return true
    }

    /// Sets the level of the next transaction: the queue's own for a write that must reach the
    /// disk, `NORMAL` (written to the operating system only) for the others (see the type's comment).
    private func synchronous(_ c: SQLiteConnection, durable: Bool) throws {
        try c.setSynchronous(durable ? durableLevel : "NORMAL")
    }

    private func run<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        do {
            return try lock.withLock { _ in
                guard let c = connection else { throw SQLiteError.misuse("the queue is closed") }
                return try body(c)
            }
        } catch let e as SQLiteError {
            throw OutboxError(path: path, message: e.message, isDiskFull: e.isDiskFull)
        }
    }

    /// `body` on the reading connection (see the type's comment).
    private func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        do {
            return try readLock.withLock { _ in
                guard let c = reader else { throw SQLiteError.misuse("the queue is closed") }
                return try body(c)
            }
        } catch let e as SQLiteError {
            throw OutboxError(path: path, message: e.message, isDiskFull: e.isDiskFull)
        }
    }

    /// ``Outbox/write(_:)``: on the outbox's own thread, in order with commits and background
    /// removals, so a delivering loop's delete or in-flight mark never holds the pipeline's thread
    /// through its fsync.
    public func write<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            commits.async { continuation.resume(with: Result { try body() }) }
        }
    }

    /// The oldest age origin: the first record in queue order, or a late one (see `init`).
    private func refreshOldest(_ c: SQLiteConnection) throws {
        let search = try c.statement("SELECT seq, enqueued_ms FROM pending WHERE NOT late AND seq >= ?1 ORDER BY seq LIMIT 1")
        try search.bind(1, inOrderFrom)
        var first: Int64?
        if try search.step() {
            inOrderFrom = search.int(0)
            first = search.int(1)
            search.release()
        } else {
            search.release()
            // None: every record queued now is late, and the next one gets a higher seq; it
            // starts the order again (no record in order is left for it to follow).
            inOrderFrom = (try c.queryInt("SELECT max(seq) FROM pending")).map { $0 + 1 } ?? inOrderFrom
            inOrderAge = nil
        }
        let late = try c.queryInt("SELECT min(enqueued_ms) FROM pending WHERE late")
        cachedOldest.withLock { $0 = [first, late].compactMap { $0 }.min() }
    }

    /// Rows of the multi-row INSERT ``append(_:at:)`` uses while at least this many are left
    /// (5 parameters each: far below SQLite's limit of 32,766).
    static let rowsPerInsert = 64

    static func insertSQL(rows: Int) -> String {
        let values = (0..<rows).map { r in "(?\(r * 5 + 1), ?\(r * 5 + 2), ?\(r * 5 + 3), ?\(r * 5 + 4), ?\(r * 5 + 5))" }
        return "INSERT INTO pending (id, key, position, enqueued_ms, late) VALUES " + values.joined(separator: ", ")
    }

    /// The two statements ``append(_:at:)`` runs, built once (the connection's statement cache is
    /// keyed by the text).
    static let insertManySQL = insertSQL(rows: rowsPerInsert)
    static let insertOneSQL = insertSQL(rows: 1)

    public func append(_ entries: [OutboxEntry], at now: Timestamp) throws -> Int {
        guard !entries.isEmpty else { return 0 }
        let origins = entries.map { OutboxAge.origin(fix: $0.time, commit: now.milliseconds) }
        return try run { c in
            try synchronous(c, durable: true)
            var inOrder = inOrderAge
            // Past `max_records` the oldest go, in the same transaction: a crash cannot leave the
            // queue over its limit, nor an in-flight mark naming rows that are gone.
            let over = depth + entries.count - maxRecords
            var dropped = 0, forgot = false
            try c.transaction {
                // Rows go in order, so seqs follow the entries. Many rows per statement: a statement
                // run costs about as much as the row it inserts (resetting the VM, and, for the
                // AUTOINCREMENT key, writing sqlite_sequence at its end), so one per row doubled the
                // commit's CPU time (callgrind: ~25,000 instructions per row).
                var next = entries.startIndex
                func bind(_ statement: SQLiteStatement, _ i: Int, row: Int32) throws {
                    let e = entries[i], origin = origins[i]
                    let late = inOrder.map { origin < $0 } ?? false
                    if !late { inOrder = origin }
                    try statement.bind(row * 5 + 1, e.id)
                    try statement.bind(row * 5 + 2, e.key)
                    try statement.bind(row * 5 + 3, e.payload)
                    try statement.bind(row * 5 + 4, origin)
                    try statement.bind(row * 5 + 5, late ? 1 : 0)
                }
                if entries.count >= SQLiteOutbox.rowsPerInsert {
                    let many = try c.statement(SQLiteOutbox.insertManySQL)
                    while entries.endIndex - next >= SQLiteOutbox.rowsPerInsert {
                        for row in 0..<SQLiteOutbox.rowsPerInsert { try bind(many, next + row, row: Int32(row)) }
                        try many.stepDone()
                        next += SQLiteOutbox.rowsPerInsert
                    }
                }
                let insert = try c.statement(SQLiteOutbox.insertOneSQL)
                for i in next..<entries.endIndex {
                    try bind(insert, i, row: 0)
                    try insert.stepDone()
                }
                if over > 0 {
                    let drop = try c.statement("DELETE FROM pending WHERE seq IN (SELECT seq FROM pending ORDER BY seq LIMIT ?1)")
                    try drop.bind(1, Int64(over))
                    try drop.stepDone()
                    dropped = c.changes
                    forgot = try dropped > 0 && forgetInFlight(c)
                }
            }
            // Only after COMMIT (a failed one inserted nothing; keeping the higher age would only
            // make later records late, which is never wrong).
            inOrderAge = inOrder
            // Committed: count them before anything else can fail.
            cachedDepth.add(entries.count - dropped, ordering: .relaxed)
            if forgot { cachedInFlight.withLock { $0 = nil } }
            // New records may be older than any queued (ages need not follow queue order).
            let oldestNew = origins.min() ?? now.milliseconds
            if dropped > 0 || cachedOldest.withLock({ $0.map { oldestNew < $0 } ?? true }) { try refreshOldest(c) }
            return dropped
        }
    }

    /// ``append(_:at:)`` on the outbox's own thread. A commit waits for its fsync
    /// (`synchronous=full`: a few milliseconds, far more on a slow card or a busy disk); on the
    /// pipeline's thread (one by default) every source and transform would wait with it. Here they
    /// go on, and what they produce meanwhile gathers in the sink's input, which the next commit
    /// takes as one batch: one fsync serves more positions as the rate rises. The caller still
    /// waits for its own commit before it acknowledges upstream.
    public func commit(_ entries: [OutboxEntry], at now: Timestamp) async throws -> Int {
        guard !entries.isEmpty else { return 0 }
        return try await withCheckedThrowingContinuation { continuation in
            commits.async { continuation.resume(with: Result { try self.append(entries, at: now) }) }
        }
    }

    public func records(after seq: Int64, limit: Int) throws -> [OutboxRecord] {
        try read { c in
            let select = try c.statement("SELECT seq, id, key, position, enqueued_ms FROM pending WHERE seq > ?1 ORDER BY seq LIMIT ?2")
            try select.bind(1, seq)
            try select.bind(2, Int64(limit))
            var out: [OutboxRecord] = []
            while try select.step() {
                out.append(OutboxRecord(seq: select.int(0), id: select.text(1), key: select.text(2), payload: select.bytes(3), enqueuedAt: select.int(4)))
            }
            return out
        }
    }

    public func newestSeq(forKey key: String) throws -> Int64? {
        try read { c in
            // `key <> ''` lets SQLite use the partial index; no sink asks for the empty key, which scans.
            let select = try c.statement(key.isEmpty ? "SELECT max(seq) FROM pending WHERE key = ?1" : "SELECT max(seq) FROM pending WHERE key = ?1 AND key <> ''")
            try select.bind(1, key)
            defer { select.release() }
            guard try select.step(), !select.isNull(0) else { return nil }
            return select.int(0)
        }
    }

    public func remove(through seq: Int64) throws {
        try remove(through: seq, markingInFlight: nil, durably: false)
    }

    /// One transaction: the delete, forgetting an in-flight mark it covers, and the next mark;
    /// synced only when `durably` (a mark that must survive a power cut: see the type's comment).
    public func remove(through seq: Int64, markingInFlight next: Int64?, durably: Bool) throws {
        try run { c in
            try synchronous(c, durable: durably && next != nil)
            let marked = cachedInFlight.withLock { $0 }
            let forget = marked.map { seq >= $0 } ?? false
            var removed = 0
            try c.transaction {
                let delete = try c.statement("DELETE FROM pending WHERE seq <= ?1")
                try delete.bind(1, seq)
                try delete.stepDone()
                removed = c.changes
                if let next {
                    if next != marked || forget || durably {
                        try c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('in_flight', '\(next)')")
                    }
                } else if forget {
                    try c.execute("DELETE FROM meta WHERE key = 'in_flight'")
                }
            }
            // Only after COMMIT: a failed commit changed nothing, and the caches must say so.
            cachedDepth.subtract(removed, ordering: .relaxed)
            if let next {
                cachedInFlight.withLock { $0 = next }
            } else if forget {
                cachedInFlight.withLock { $0 = nil }
            }
            try refreshOldest(c)
        }
    }

    public func remove(_ seqs: [Int64]) throws {
        guard !seqs.isEmpty else { return }
        try run { c in
            try synchronous(c, durable: false)
            var removed = 0
            try c.transaction {
                // Acknowledgements come mostly in order: one statement per run of consecutive
                // seqs, not one per record.
                let delete = try c.statement("DELETE FROM pending WHERE seq BETWEEN ?1 AND ?2")
                for run in SQLiteOutbox.runs(of: seqs) {
                    try delete.bind(1, run.lowerBound)
                    try delete.bind(2, run.upperBound)
                    try delete.stepDone()
                    removed += c.changes
                }
            }
            cachedDepth.subtract(removed, ordering: .relaxed)
            try refreshOldest(c)
        }
    }

    /// `seqs` as ranges of consecutive values, in ascending order.
    static func runs(of seqs: [Int64]) -> [ClosedRange<Int64>] {
        var out: [ClosedRange<Int64>] = []
        for s in seqs.sorted() {
            if let last = out.last, s <= last.upperBound + 1 {
                if s > last.upperBound { out[out.count - 1] = last.lowerBound...s }
            } else {
                out.append(s...s)
            }
        }
        return out
    }

    public func remove(_ seqs: [Int64], done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        commits.async { done(Result { try self.remove(seqs) }) }
    }

    public func deadLetter(_ records: [OutboxRecord], status: Int, answer: String, at now: Timestamp) throws {
        guard !records.isEmpty else { return }
        try run { c in
            try synchronous(c, durable: true)
            var removed = 0
            let last = records.map(\.seq).max() ?? 0
            let settles = cachedInFlight.withLock { $0.map { last >= $0 } ?? false }
            try c.transaction {
                let insert = try c.statement("""
                    INSERT OR REPLACE INTO dead_letters (seq, id, position, enqueued_ms, failed_ms, status, answer, key)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                    """)
                let delete = try c.statement("DELETE FROM pending WHERE seq = ?1")
                for r in records {
                    try insert.bind(1, r.seq)
                    try insert.bind(2, r.id)
                    try insert.bind(3, r.payload)
                    try insert.bind(4, r.enqueuedAt)
                    try insert.bind(5, now.milliseconds)
                    try insert.bind(6, Int64(status))
                    try insert.bind(7, answer)
                    try insert.bind(8, r.key)
                    try insert.stepDone()
                    try delete.bind(1, r.seq)
                    try delete.stepDone()
                    removed += c.changes
                }
                // A mark these records settle goes in the same transaction: a crash between two
                // would leave a mark over records that left the queue.
                if settles { try c.execute("DELETE FROM meta WHERE key = 'in_flight'") }
            }
            // Only after COMMIT: a failed commit keeps the rows, and the count must say so.
            cachedDepth.subtract(removed, ordering: .relaxed)
            if settles { cachedInFlight.withLock { $0 = nil } }
            try refreshOldest(c)
        }
    }

    public func dropOlder(than cutoff: Timestamp) throws -> Int {
        // Nothing to do unless the oldest (by the index) is too old.
        guard let oldest = oldestEnqueuedAt, oldest < cutoff.milliseconds else { return 0 }
        return try run { c in
            try synchronous(c, durable: true)
            var n = 0, forgot = false
            try c.transaction {
                // In queue order (see `init`), the expired records are those before the first
                // that is not: the scan stops there.
                let boundary = try c.statement("SELECT seq FROM pending WHERE NOT late AND seq >= ?1 AND enqueued_ms >= ?2 ORDER BY seq LIMIT 1")
                try boundary.bind(1, inOrderFrom)
                try boundary.bind(2, cutoff.milliseconds)
                let before = try boundary.step() ? boundary.int(0) : Int64.max
                boundary.release()
                let prefix = try c.statement("DELETE FROM pending WHERE NOT late AND seq >= ?1 AND seq < ?2")
                try prefix.bind(1, inOrderFrom)
                try prefix.bind(2, before)
                try prefix.stepDone()
                n += c.changes
                let late = try c.statement("DELETE FROM pending WHERE late AND enqueued_ms < ?1")
                try late.bind(1, cutoff.milliseconds)
                try late.stepDone()
                n += c.changes
                forgot = try n > 0 && forgetInFlight(c)
            }
            cachedDepth.subtract(n, ordering: .relaxed)
            if forgot { cachedInFlight.withLock { $0 = nil } }
            try refreshOldest(c)
            return n
        }
    }

    public var depth: Int { cachedDepth.load(ordering: .relaxed) }

    public var oldestEnqueuedAt: Int64? { cachedOldest.withLock { $0 } }

    public func deadLetterCount() throws -> Int {
        try run { c in Int(try c.queryInt("SELECT count(*) FROM dead_letters") ?? 0) }
    }
}

// MARK: - SQLite
