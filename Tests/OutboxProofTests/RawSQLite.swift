import CSQLite

/// A plain SQLite connection on the default VFS, for what the outbox does not expose: its dead
/// letters and `PRAGMA integrity_check`.
final class RawSQLite {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private var db: OpaquePointer?

    init(path: String) throws {
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil)
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "error \(rc)"
            sqlite3_close(db)
            db = nil
            throw Failure(description: "cannot open \(path): \(message)")
        }
    }

    deinit { close() }

    func close() {
        sqlite3_close(db)
        db = nil
    }

    /// Every row of `sql`, each column as its bytes (nil for NULL).
    func rows(_ sql: String) throws -> [[[UInt8]?]] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw failure(sql) }
        defer { sqlite3_finalize(statement) }
        var out: [[[UInt8]?]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return out }
            guard rc == SQLITE_ROW else { throw failure(sql) }
            out.append((0..<sqlite3_column_count(statement)).map { i in
                guard sqlite3_column_type(statement, i) != SQLITE_NULL, let p = sqlite3_column_text(statement, i) else { return nil }
                return Array(UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(statement, i))))
            })
        }
    }

    private func failure(_ sql: String) -> Failure {
        Failure(description: "\(sql): \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed")")
    }

    /// `PRAGMA integrity_check`'s answer, one line per problem ("ok" when there is none).
    func integrityCheck() throws -> String {
        try rows("PRAGMA integrity_check").map { String(decoding: $0.first.flatMap { $0 } ?? [], as: UTF8.self) }.joined(separator: "; ")
    }

    /// The outbox's dead letters, by seq.
    func deadLetters() throws -> [ModelDeadLetter] {
        try rows("SELECT seq, id, position, enqueued_ms, failed_ms, status, answer FROM dead_letters ORDER BY seq").map { row in
            let text = { (i: Int) in String(decoding: row[i] ?? [], as: UTF8.self) }
            let int = { (i: Int) in Int64(text(i)) ?? -1 }
            return ModelDeadLetter(seq: int(0), id: text(1), payload: row[2] ?? [], enqueuedAt: int(3), failedAt: int(4),
                                   status: int(5), answer: text(6))
        }
    }
}
