import GatewayCore
import SystemIO
#if canImport(Glibc)
import Glibc
import SQLiteStorage
import EnvironmentChecks
#endif

/// The queue file's tables and the checks made before one is opened or used (``SQLiteOutbox``).
extension SQLiteOutbox {
    /// Creates the tables and indexes of a new queue file, and brings a file written by an
    /// earlier version up to date in place (columns added, indexes replaced).
    static func createOrUpgradeTables(_ c: SQLiteConnection) throws {
        try c.execute("""
            CREATE TABLE IF NOT EXISTS pending (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL,
                position TEXT NOT NULL,
                enqueued_ms INTEGER NOT NULL,
                key TEXT NOT NULL DEFAULT '',
                late INTEGER NOT NULL DEFAULT 1)
            """)
        // Queue files written before the key column existed (http sinks) gain it in place.
        if try !c.columnExists(table: "pending", column: "key") {
            try c.execute("ALTER TABLE pending ADD COLUMN key TEXT NOT NULL DEFAULT ''")
        }
        // And files written before `late` existed: their records count as late (indexed by age),
        // which is always right, only slower; so does a record inserted by hand (the http and
        // postgres READMEs' requeue of dead letters), by the column's default.
        if try !c.columnExists(table: "pending", column: "late") {
            try c.execute("ALTER TABLE pending ADD COLUMN late INTEGER NOT NULL DEFAULT 1")
        }
        try c.execute("""
            CREATE TABLE IF NOT EXISTS dead_letters (
                seq INTEGER PRIMARY KEY,
                id TEXT NOT NULL,
                position TEXT NOT NULL,
                enqueued_ms INTEGER NOT NULL,
                failed_ms INTEGER NOT NULL,
                status INTEGER NOT NULL,
                answer TEXT NOT NULL,
                key TEXT NOT NULL DEFAULT '')
            """)
        // Kept with a dead letter so that copying it back to `pending` queues it as it was (its
        // topic; for http, that the position holds its body encoding).
        if try !c.columnExists(table: "dead_letters", column: "key") {
            try c.execute("ALTER TABLE dead_letters ADD COLUMN key TEXT NOT NULL DEFAULT ''")
        }
        // Ages need not follow queue order, but nearly always do: a record's age counts from its
        // commit (``OutboxAge``), later only for a fix time ahead of the clock, earlier only after
        // the clock stepped back. A record committed no older than every record before it in
        // queue order goes in with `late` 0; along the queue their ages never decrease, so
        // the oldest of them is the first, and expired ones are a prefix. The others (`late` 1)
        // are found by a partial index on their age. An index on every record's age cost every
        // insert and delete an entry: 14% of a durable http sink's CPU time for 100,000
        // positions (0.675 s → 0.582 s, 6 alternating runs).
        try c.execute("DROP INDEX IF EXISTS pending_age")
        try c.execute("CREATE INDEX IF NOT EXISTS pending_late ON pending (enqueued_ms) WHERE late")
        // Only rows with a key (an mqtt sink's topic, for "retain only the newest per topic"):
        // the other sinks' rows have none, and a full index cost each of their inserts and
        // deletes an entry (without it, 100,000 positions through a durable http sink took
        // 15-20% less time). Queue files of earlier versions drop the full one.
        try c.execute("DROP INDEX IF EXISTS pending_key")
        try c.execute("CREATE INDEX IF NOT EXISTS pending_topic ON pending (key, seq) WHERE key <> ''")
        // A write at start turns a full disk or a read-only file into an error now, not at the first position.
        try c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        try c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('opened', datetime('now'))")
    }

    /// Reports a path that is a directory, a missing or unwritable directory, a filesystem that
    /// cannot hold files (`/proc`), or a full disk, with the absolute path and the reason.
    static func checkDirectory(of path: String) throws(OutboxError) {
        var st = stat()
        if stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
            throw OutboxError(path: FileCheck.absolute(path), message: "is a directory; give a file in it, such as \(FileCheck.absolute(path))/queue.sqlite")
        }
        let dir = FileCheck.directory(of: path)
        if let problem = FileCheck.directoryProblem(dir) { throw OutboxError(path: FileCheck.absolute(path), message: problem) }
        if let free = FileCheck.freeBytes(dir), free < 1 << 20 {
            // Below 1 MiB SQLite's journal cannot grow; fail at start rather than at the first batch.
            throw OutboxError(path: FileCheck.absolute(path), message: "disk full: \(FileCheck.formatBytes(free)) free in \(FileCheck.absolute(dir))", isDiskFull: true)
        }
    }

    /// Refuses a database that holds tables of another program (writing a queue into it would
    /// change that program's file); an empty database is fine.
    static func checkSchema(_ c: SQLiteConnection, path: String) throws {
        let tables = try c.queryTexts("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        guard !tables.isEmpty else { return }
        if !tables.contains("pending") {
            throw OutboxError(path: path, message: "is an SQLite database but not a locgate queue (no table \"pending\"; tables: \(tables.joined(separator: ", "))); give another file")
        }
        for column in ["seq", "id", "position", "enqueued_ms"] where try !c.columnExists(table: "pending", column: column) {
            throw OutboxError(path: path, message: "is not a locgate queue: table \"pending\" has no column \"\(column)\"")
        }
    }

    /// Checks, without creating or changing anything, that `path` can hold a queue: its directory
    /// (as ``init(path:maxRecords:synchronousFull:)`` checks it), and an existing file is
    /// writable and opens read-only as a locgate queue. Returns the bytes free in the directory.
    public static func inspect(path: String) throws(OutboxError) -> UInt64? {
        try checkDirectory(of: path)
        let shown = FileCheck.absolute(path)
        var st = stat()
        if stat(path, &st) == 0 && st.st_size > 0 {
            if access(path, R_OK | W_OK) != 0 { throw OutboxError(path: shown, message: "cannot open for writing: \(FileCheck.reason(errno))") }
            do {
                let c = try SQLiteConnection(path: path, readOnly: true)
                defer { c.close() }
                try checkSchema(c, path: shown)
            } catch let e as SQLiteError {
                throw OutboxError(path: shown, message: "does not open as a locgate queue: \(e.message)")
            } catch {
                throw error as? OutboxError ?? OutboxError(path: shown, message: "\(error)")
            }
        }
        return FileCheck.freeBytes(FileCheck.directory(of: path))
    }
}
