import CPostgres
import GatewayCore
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Why a PostgreSQL operation failed: what libpq or the server said, sorted by what can be done about it.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// No server answered: refused, unreachable, no such socket, a name that does not resolve.
        case unreachable
        /// The server answered the connection and refused it (password, database, role, pg_hba,
        /// TLS): retrying cannot fix it.
        case refused
        /// The server cannot take connections now (starting up, shutting down, too many clients).
        case unavailable
        /// The connection broke while in use.
        case lost
        /// The operation passed its deadline; the connection was given up.
        case timedOut
        /// ``PostgresConnection/interrupt()`` was called (the task was cancelled).
        case interrupted
        /// The server answered a statement with an error (``sqlState`` says which).
        case statement
    }

    public var kind: Kind
    /// The five-character SQLSTATE (`23505`, `28P01`) when the server sent one.
    public var sqlState: String?
    public var message: String
    public var detail: String?
    public var hint: String?

    public init(_ kind: Kind, sqlState: String? = nil, message: String, detail: String? = nil, hint: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
    }

    public var description: String {
        var s = message
        if let detail, !detail.isEmpty { s += " (\(detail))" }
        if let hint, !hint.isEmpty { s += "; hint: \(hint)" }
        if let sqlState { s += " [SQLSTATE \(sqlState)]" }
        return s
    }

    /// True when the connection cannot be used any more.
    public var breaksConnection: Bool { kind != .statement }
}

/// What one statement returned.
struct PostgresResult: Sendable {
    /// Rows as text (nil for SQL NULL).
    var rows: [[String?]] = []
    /// Rows inserted, updated, deleted or copied (`PQcmdTuples`), 0 when the command reports none.
    var affected = 0
}

/// One connection to PostgreSQL through libpq. This is the only file that talks to libpq.
///
/// Every call is synchronous and runs on the caller's thread — the sink calls it inside
/// ``BlockingWork/run(_:)``, `locgate validate` directly — but libpq is used in non-blocking mode and
/// every wait is a `poll` on the connection's socket and a ``Wakeup``: each operation has a
/// deadline of its own (a server that stops answering cannot hold the sink), and ``interrupt()``
/// from any thread ends a wait at once (task cancellation at shutdown). An interrupted or timed-out
/// connection is finished; make a new one.
///
/// Not for concurrent use: one task at a time (the sink's delivering task) calls it.
final class PostgresConnection: @unchecked Sendable {
    // @unchecked: `conn` is touched only by the one task that owns the connection, one call at a
    // time (calls hop threads through BlockingWork, whose queue hand-offs order the memory);
    // `interrupt()` only signals the wakeup, which is thread-safe.
    private var conn: OpaquePointer?
    private let wakeup: Wakeup
    /// `host:port/database` as libpq resolved it, for logs (never the password); set by ``connect(timeout:)``.
    private(set) var server = ""
    /// The server's version number (`150018` for 15.18).
    private(set) var serverVersion = 0

    /// Prepares a connection with `parameters` (libpq keywords; a `dbname` that is a URL or
    /// `key=value` string is expanded, so pairs before it can be overridden by it and pairs after
    /// it override it); ``connect(timeout:)`` connects.
    init(parameters: [(String, String)]) throws(PostgresError) {
        do {
            wakeup = try Wakeup()
        } catch {
            throw PostgresError(.unreachable, message: "cannot make a wakeup pipe: \(error)")
        }
        self.parameters = parameters
    }

    private let parameters: [(String, String)]

    /// Connects within `timeout`; ``interrupt()`` ends the attempt.
    func connect(timeout: Duration) throws(PostgresError) {
        close()
        let keywords = parameters.map { strdup($0.0) } + [nil]
        let values = parameters.map { strdup($0.1) } + [nil]
        defer {
            for p in keywords { free(p) }
            for p in values { free(p) }
        }
        let started = keywords.map { UnsafePointer($0) }.withUnsafeBufferPointer { k in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { v in
                PQconnectStartParams(k.baseAddress, v.baseAddress, 1)
            }
        }
        guard let c = started else { throw PostgresError(.unreachable, message: "libpq could not allocate a connection") }
        conn = c
        // Errors then carry their SQLSTATE ("FATAL:  28P01: password authentication failed …"):
        // libpq has no other way to tell a refused login from a server that is starting up.
        PQsetErrorVerbosity(c, PQERRORS_VERBOSE)
        // Notices ("relation … already exists, skipping") would go to stderr: dropped.
        PQsetNoticeProcessor(c, { _, _ in }, nil)
        let deadline = ContinuousClock.now + timeout
        var reachedServer = false
        var status = PQstatus(c) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING
        while status != PGRES_POLLING_OK {
            if status == PGRES_POLLING_FAILED {
                let error = PostgresConnection.connectionError(String(cString: PQerrorMessage(c)), reachedServer: reachedServer)
                close()
                throw error
            }
            let events = Int16(status == PGRES_POLLING_READING ? POLLIN : POLLOUT)
            let left = deadline - ContinuousClock.now
            if left <= .zero {
                close()
                throw PostgresError(.timedOut, message: "no connection within \(DurationText.format(timeout))")
            }
            let waited = wakeup.waitHere([PQsocket(c)], events: events, timeout: left)
            if waited.woken {
                close()
                throw PostgresError(.interrupted, message: "interrupted while connecting")
            }
            if waited.ready.isEmpty { continue }
            status = PQconnectPoll(c)
            switch PQstatus(c) {
            case CONNECTION_AWAITING_RESPONSE, CONNECTION_AUTH_OK, CONNECTION_SSL_STARTUP, CONNECTION_SETENV,
                 CONNECTION_CHECK_WRITABLE, CONNECTION_CONSUME, CONNECTION_CHECK_TARGET, CONNECTION_OK:
                reachedServer = true
            default: break
            }
        }
        server = "\(PostgresConnection.text(PQhost(c)) ?? "?"):\(PostgresConnection.text(PQport(c)) ?? "?")/\(PostgresConnection.text(PQdb(c)) ?? "?")"
        serverVersion = Int(PQserverVersion(c))
        PQsetErrorVerbosity(c, PQERRORS_DEFAULT)
        guard PQsetnonblocking(c, 1) == 0 else {
            let message = String(cString: PQerrorMessage(c))
            close()
            throw PostgresError(.lost, message: "cannot switch the connection to non-blocking mode: \(message)")
        }
    }

    deinit { close() }

    /// Ends the connection (idempotent).
    func close() {
        if let c = conn { PQfinish(c) }
        conn = nil
    }

    /// Ends the current or next wait at once, from any thread; the connection is then unusable.
    func interrupt() { wakeup.signal() }

    /// True while the connection can take statements.
    var isUsable: Bool {
        guard let c = conn else { return false }
        return PQstatus(c) == CONNECTION_OK
    }

    // MARK: - Statements

    /// Runs `sql` (one statement or several separated by `;`, simple protocol) and returns each
    /// statement's result; the first error is thrown once the connection is idle again.
    @discardableResult
    func execute(_ sql: String, timeout: Duration) throws(PostgresError) -> [PostgresResult] {
        let c = try usable()
        let deadline = ContinuousClock.now + timeout
        guard PQsendQuery(c, sql) == 1 else { throw failure(c, "cannot send the statement") }
        try flush(c, deadline: deadline)
        return try results(c, deadline: deadline)
    }

    /// Runs one statement with text parameters (`$1`, `$2`, …; nil is NULL).
    func query(_ sql: String, _ parameters: [String?] = [], timeout: Duration) throws(PostgresError) -> PostgresResult {
        let c = try usable()
        let deadline = ContinuousClock.now + timeout
        let copies = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { for p in copies { free(p) } }
        let sent = copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
            PQsendQueryParams(c, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
        }
        guard sent == 1 else { throw failure(c, "cannot send the statement") }
        try flush(c, deadline: deadline)
        return try results(c, deadline: deadline).last ?? PostgresResult()
    }

    /// Runs `COPY … FROM STDIN` with `data` in COPY's text format; returns the rows copied.
    func copy(_ sql: String, data: [UInt8], timeout: Duration) throws(PostgresError) -> Int {
        let c = try usable()
        let deadline = ContinuousClock.now + timeout
        guard PQsendQuery(c, sql) == 1 else { throw failure(c, "cannot send COPY") }
        try flush(c, deadline: deadline)
        guard let started = try nextResult(c, deadline: deadline) else {
            throw PostgresError(.lost, message: "the server did not answer COPY")
        }
        let startStatus = PQresultStatus(started)
        if startStatus != PGRES_COPY_IN {
            let error = statementError(c, started)
            PQclear(started)
            _ = try? results(c, deadline: deadline)
            throw error
        }
        PQclear(started)
        // In chunks, so libpq's output buffer stays small; each waits until the socket takes it.
        let chunk = 1 << 18
        var offset = 0
        while offset < data.count {
            let n = min(chunk, data.count - offset)
            while true {
                let r = data.withUnsafeBufferPointer { b in
                    b.baseAddress.map { base in
                        (base + offset).withMemoryRebound(to: CChar.self, capacity: n) { PQputCopyData(c, $0, Int32(n)) }
                    } ?? 1
                }
                if r == 1 { break }
                if r < 0 { throw failure(c, "cannot send COPY data") }
                try wait(c, for: Int16(POLLOUT), deadline: deadline)
                guard PQflush(c) >= 0 else { throw failure(c, "cannot send COPY data") }
            }
            offset += n
        }
        while true {
            let r = PQputCopyEnd(c, nil)
            if r == 1 { break }
            if r < 0 { throw failure(c, "cannot end COPY") }
            try wait(c, for: Int16(POLLOUT), deadline: deadline)
        }
        try flush(c, deadline: deadline)
        return try results(c, deadline: deadline).last?.affected ?? 0
    }

    // MARK: - Waiting

    private func usable() throws(PostgresError) -> OpaquePointer {
        guard let c = conn, PQstatus(c) == CONNECTION_OK else {
            throw PostgresError(.lost, message: "the connection is closed")
        }
        return c
    }

    /// Sends what libpq buffered, reading meanwhile so the server can never block on us.
    private func flush(_ c: OpaquePointer, deadline: ContinuousClock.Instant) throws(PostgresError) {
        while true {
            let r = PQflush(c)
            if r == 0 { return }
            if r < 0 { throw failure(c, "cannot send to the server") }
            let ready = try wait(c, for: Int16(POLLOUT | POLLIN), deadline: deadline)
            if ready & Int16(POLLIN) != 0, PQconsumeInput(c) == 0 { throw failure(c, "cannot read from the server") }
        }
    }

    /// Waits until the socket is ready for `events`; returns what it is ready for.
    @discardableResult
    private func wait(_ c: OpaquePointer, for events: Int16, deadline: ContinuousClock.Instant) throws(PostgresError) -> Int16 {
        while true {
            let left = deadline - ContinuousClock.now
            if left <= .zero {
                close()
                throw PostgresError(.timedOut, message: "no answer from the server in time; connection given up")
            }
            let waited = wakeup.waitHere([PQsocket(c)], events: events, timeout: left)
            if waited.woken {
                close()
                throw PostgresError(.interrupted, message: "interrupted")
            }
            if let r = waited.ready.first { return r.events }
        }
    }

    /// The next result, or nil when the command is complete.
    private func nextResult(_ c: OpaquePointer, deadline: ContinuousClock.Instant) throws(PostgresError) -> OpaquePointer? {
        while PQisBusy(c) == 1 {
            try wait(c, for: Int16(POLLIN), deadline: deadline)
            guard PQconsumeInput(c) == 1 else { throw failure(c, "cannot read from the server") }
        }
        return PQgetResult(c)
    }

    /// Every result until the connection is idle; throws the first error after that.
    private func results(_ c: OpaquePointer, deadline: ContinuousClock.Instant) throws(PostgresError) -> [PostgresResult] {
        var out: [PostgresResult] = []
        var firstError: PostgresError?
        while let r = try nextResult(c, deadline: deadline) {
            defer { PQclear(r) }
            let status = PQresultStatus(r)
            switch status {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                out.append(PostgresConnection.read(r))
            case PGRES_COPY_IN:
                // Only `copy` expects this: end the copy so the connection becomes idle.
                _ = PQputCopyEnd(c, "unexpected COPY")
                try flush(c, deadline: deadline)
            default:
                if firstError == nil { firstError = statementError(c, r) }
            }
        }
        if let firstError { throw firstError }
        if PQstatus(c) != CONNECTION_OK { throw failure(c, "the connection broke") }
        return out
    }

    private static func read(_ r: OpaquePointer) -> PostgresResult {
        var result = PostgresResult()
        result.affected = Int(String(cString: PQcmdTuples(r))) ?? 0
        let rows = PQntuples(r), fields = PQnfields(r)
        guard rows > 0, fields > 0 else { return result }
        result.rows.reserveCapacity(Int(rows))
        for row in 0..<rows {
            var values: [String?] = []
            values.reserveCapacity(Int(fields))
            for field in 0..<fields {
                values.append(PQgetisnull(r, row, field) == 1 ? nil : String(cString: PQgetvalue(r, row, field)))
            }
            result.rows.append(values)
        }
        return result
    }

    // MARK: - Errors

    /// A statement's error result as a ``PostgresError``.
    private func statementError(_ c: OpaquePointer, _ r: OpaquePointer) -> PostgresError {
        func field(_ code: UInt8) -> String? {
            PostgresConnection.text(PQresultErrorField(r, Int32(code)))
        }
        let message = field(UInt8(ascii: "M")) ?? PostgresConnection.trimmed(String(cString: PQresultErrorMessage(r)))
        var detail = field(UInt8(ascii: "D"))
        // COPY names the line and column of a bad value in the context.
        if let context = field(UInt8(ascii: "W")), context.hasPrefix("COPY ") {
            detail = [detail, context].compactMap { $0 }.joined(separator: "; ")
        }
        let lost = PQstatus(c) != CONNECTION_OK
        return PostgresError(lost ? .lost : .statement, sqlState: field(UInt8(ascii: "C")), message: message,
                             detail: detail, hint: field(UInt8(ascii: "H")))
    }

    /// A failure of the connection itself (libpq's message).
    private func failure(_ c: OpaquePointer, _ what: String) -> PostgresError {
        let message = PostgresConnection.trimmed(String(cString: PQerrorMessage(c)))
        return PostgresError(.lost, message: message.isEmpty ? what : "\(what): \(message)")
    }

    /// Sorts a failed connection attempt by libpq's verbose message, which carries the server's
    /// SQLSTATE when the server answered: a refusal retrying cannot fix (28xxx authentication, 3D000
    /// no such database, 42501 no CONNECT privilege), or a server that cannot take connections now.
    static func connectionError(_ text: String, reachedServer: Bool) -> PostgresError {
        var sqlState: String?
        var lines: [String] = []
        for raw in text.split(separator: "\n") {
            var line = String(raw)
            // Verbose messages add the server's source location: of no use to an operator.
            if line.hasPrefix("LOCATION:") { continue }
            // "… failed: FATAL:  28P01: password authentication failed …": take the code out.
            if let range = line.firstRange(of: ":  "), sqlState == nil {
                let after = line[range.upperBound...]
                let code = after.prefix(5)
                if code.count == 5, code.allSatisfy({ $0.isNumber || ($0.isUppercase && $0.isASCII) }), after.dropFirst(5).hasPrefix(": ") {
                    sqlState = String(code)
                    line = String(line[..<range.upperBound]) + String(after.dropFirst(7))
                }
            }
            lines.append(line.trimmingCharacters(in: .whitespaces))
        }
        let message = lines.filter { !$0.isEmpty }.joined(separator: "; ")
        let kind: PostgresError.Kind
        if let state = sqlState {
            // 57P03 starting up / shutting down / recovery, 53300 too many clients, 57P01 shut down
            // while connecting: the server will take connections again.
            kind = state.hasPrefix("53") || state.hasPrefix("57") || state.hasPrefix("08") ? .unavailable : .refused
        } else if reachedServer, message.contains("SSL") || message.contains("certificate") || message.contains("GSS") {
            // libpq's own refusals after the server answered: TLS required, not offered, not trusted.
            kind = .refused
        } else {
            kind = .unreachable
        }
        return PostgresError(kind, sqlState: sqlState, message: message)
    }

    /// A C string, or nil for NULL and "".
    private static func text(_ p: UnsafePointer<CChar>?) -> String? {
        guard let p, p.pointee != 0 else { return nil }
        return String(cString: p)
    }

    private static func trimmed(_ s: String) -> String {
        s.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: "; ")
    }

    // MARK: - Connection strings

    /// The pairs of a libpq connection string (`postgresql://…` or `key=value …`), or libpq's reason
    /// it is not one. Parsing only: nothing is looked up or connected.
    static func parse(connectionString: String) -> Result<[String: String], PostgresError> {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &error) else {
            let reason = error.map { trimmed(String(cString: $0)) } ?? "out of memory"
            if let error { PQfreemem(error) }
            return .failure(PostgresError(.refused, message: reason))
        }
        defer { PQconninfoFree(options) }
        var out: [String: String] = [:]
        var p = options
        while let keyword = p.pointee.keyword {
            if let value = p.pointee.val { out[String(cString: keyword)] = String(cString: value) }
            p += 1
        }
        return .success(out)
    }
}
