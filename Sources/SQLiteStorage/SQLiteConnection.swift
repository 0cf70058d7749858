// The one file that talks to SQLite (the C API): the connection, its cached statements and
// SQLite's errors. SQLiteOutbox (DeliveryEngine) keeps the queue's tables and transactions on top
// of it, SQLiteStateStore (SQLiteState) the per-device state's.
import CSQLite
import SystemIO
#if canImport(Glibc)
import Glibc
import EnvironmentChecks
#endif

/// An SQLite error code with SQLite's message.
package struct SQLiteError: Error {
    package var code: Int32
    package var message: String

    package var isDiskFull: Bool { code & 0xFF == SQLITE_FULL }

    /// A call the queue refuses itself (SQLite's code for a misused handle).
    package static func misuse(_ message: String) -> SQLiteError { SQLiteError(code: SQLITE_MISUSE, message: message) }
}

/// One open SQLite database. Statements are prepared once and cached; each is reset before it
/// is handed out again and as soon as its caller is done (see ``SQLiteOutbox`` on the WAL).
package final class SQLiteConnection {
    private var db: OpaquePointer?
    private var statements: [String: SQLiteStatement] = [:]

    /// `create: false` for a second connection to a file this process has open: closing a
    /// descriptor of it would drop every POSIX lock the process holds on it (fcntl(2)), the first
    /// connection's included; another process then believes it is the last connection, and on
    /// closing deletes the WAL and its index under the first (the next read: "disk I/O error").
    package init(path: String, readOnly: Bool = false, create: Bool = true, vfs: String? = nil) throws {
        if !readOnly && create {
            // Queued positions are personal data: the file is created owner-only here, whatever
            // the umask, because SQLite would create it 0644. SQLite gives the -wal and -shm files
            // the mode of the database file, so they are 0600 too. An existing file keeps its mode,
            // and is never opened here (O_EXCL): closing a descriptor of a file this process has
            // open elsewhere would drop that connection's locks (above); access(2) opens nothing.
            let fd = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd >= 0 {
                Glibc.close(fd)
            } else if errno != EEXIST || access(path, R_OK | W_OK) != 0 {
                throw SQLiteError(code: SQLITE_CANTOPEN, message: "cannot open: \(FileCheck.reason(errno))")
            }
        }
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, vfs)
        if rc != SQLITE_OK {
            var message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            // SQLite's text ("unable to open database file") does not say why; the system's does.
            let system = db.map { sqlite3_system_errno($0) } ?? 0
            if system != 0 { message += ": \(FileCheck.reason(system))" }
            sqlite3_close(db)
            db = nil
            throw SQLiteError(code: rc, message: "cannot open: \(message)")
        }
        try check(sqlite3_busy_timeout(db, 5000))
    }

    deinit { close() }

    package func close() {
        statements.removeAll()  // statements finalize before the database closes
        sqlite3_close(db)
        db = nil
    }

    /// Every SQLite return code goes through here: anything but the accepted codes throws.
    @discardableResult
    package func check(_ rc: Int32, accept: [Int32] = [SQLITE_OK]) throws -> Int32 {
        guard accept.contains(rc) else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "error \(rc)"
            throw SQLiteError(code: rc, message: message)
        }
        return rc
    }

    package func execute(_ sql: String) throws {
        try check(sqlite3_exec(db, sql, nil, nil, nil))
    }

    /// Rows changed by the last statement.
    package var changes: Int { Int(sqlite3_changes(db)) }

    /// The `PRAGMA synchronous` level set last through ``setSynchronous(_:)``.
    private var synchronous: String?

    /// Sets `PRAGMA synchronous` (`"FULL"`, `"NORMAL"`) for the transactions that follow; a no-op
    /// when it is already the level. Only between transactions.
    package func setSynchronous(_ level: String) throws {
        guard synchronous != level else { return }
        try execute("PRAGMA synchronous=\(level)")
        synchronous = level
    }

    /// The cached statement for `sql`, reset and with its bindings cleared.
    package func statement(_ sql: String) throws -> SQLiteStatement {
        if let s = statements[sql] {
            try s.reset()
            return s
        }
        var raw: OpaquePointer?
        try check(sqlite3_prepare_v2(db, sql, -1, &raw, nil))
        let s = SQLiteStatement(raw: raw, connection: self)
        statements[sql] = s
        return s
    }

    /// The first column of the first row as an integer, nil without rows or for NULL.
    package func queryInt(_ sql: String) throws -> Int64? {
        let s = try statement(sql)
        defer { s.release() }
        guard try s.step(), !s.isNull(0) else { return nil }
        return s.int(0)
    }

    /// The first column of every row as text.
    package func queryTexts(_ sql: String) throws -> [String] {
        let s = try statement(sql)
        var out: [String] = []
        while try s.step() { out.append(s.text(0)) }
        return out
    }

    package func columnExists(table: String, column: String) throws -> Bool {
        let s = try statement("SELECT count(*) FROM pragma_table_info('\(table)') WHERE name = '\(column)'")
        defer { s.release() }
        return try s.step() && s.int(0) > 0
    }

    /// Runs `body` in one IMMEDIATE transaction: committed when it returns, rolled back when it throws.
    package func transaction(_ body: () throws -> Void) throws {
        try execute("BEGIN IMMEDIATE")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

/// A prepared statement; finalized in deinit.
package final class SQLiteStatement {
    private let raw: OpaquePointer?
    private unowned let connection: SQLiteConnection

    package init(raw: OpaquePointer?, connection: SQLiteConnection) {
        self.raw = raw
        self.connection = connection
    }

    deinit { sqlite3_finalize(raw) }

    package func reset() throws {
        try connection.check(sqlite3_reset(raw))
        try connection.check(sqlite3_clear_bindings(raw))
    }

    /// Ends the statement's read without reporting (the error, if any, was reported by `step`).
    package func release() { sqlite3_reset(raw) }

    package func bind(_ index: Int32, _ value: Int64) throws {
        try connection.check(sqlite3_bind_int64(raw, index, value))
    }

    package func bind(_ index: Int32, _ value: String) throws {
        try connection.check(sqlite3_bind_text(raw, index, value, -1, csqlite_transient))
    }

    package func bind(_ index: Int32, _ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return try bind(index, "") }
        let rc = bytes.withUnsafeBytes { buf in
            sqlite3_bind_text(raw, index, buf.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(buf.count), csqlite_transient)
        }
        try connection.check(rc)
    }

    /// Steps once: true for a row, false when done (the statement is then released).
    package func step() throws -> Bool {
        let rc = sqlite3_step(raw)
        // Released after `check` has read SQLite's message.
        defer { if rc != SQLITE_ROW { release() } }
        return try connection.check(rc, accept: [SQLITE_ROW, SQLITE_DONE]) == SQLITE_ROW
    }

    /// Steps a statement that returns no rows, and releases it.
    package func stepDone() throws {
        let rc = sqlite3_step(raw)
        defer { release() }
        try connection.check(rc, accept: [SQLITE_DONE])
    }

    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(raw, column) == SQLITE_NULL }

    package func int(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }

    package func bytes(_ column: Int32) -> [UInt8] {
        // Text first, then its length, as SQLite documents (the length is of the converted value).
        guard let p = sqlite3_column_text(raw, column) else { return [] }
        let n = Int(sqlite3_column_bytes(raw, column))
        return Array(UnsafeBufferPointer(start: p, count: n))
    }

    package func text(_ column: Int32) -> String { String(decoding: bytes(column), as: UTF8.self) }
}
