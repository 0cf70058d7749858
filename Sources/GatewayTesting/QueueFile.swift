import CSQLite

/// A sink's durable queue file as a test reads it while the sink runs: the one file of
/// GatewayTesting that talks to SQLite.
public enum QueueFile {
    /// The ids in the queue's `pending` table, read through a read-only connection of their own
    /// (empty while the file does not exist). Quick enough to call inside an acknowledgement
    /// (``SinkConformance/checkAcknowledgesOnlyAfterCommit(_:batchSize:within:make:committed:)``).
    public static func pendingIDs(_ path: String) -> Set<String> {
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return [] }
        sqlite3_busy_timeout(db, 10_000)
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(db, "SELECT id FROM pending", -1, &statement, nil) == SQLITE_OK else { return [] }
        var ids: Set<String> = []
        while sqlite3_step(statement) == SQLITE_ROW {
            if let text = sqlite3_column_text(statement, 0) { ids.insert(String(cString: text)) }
        }
        return ids
    }
}
