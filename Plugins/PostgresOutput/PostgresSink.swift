import GatewayCore
import Outbox
import SystemIO

/// Writes positions into PostgreSQL/PostGIS in batches, from a queue that keeps them until the
/// transaction that stored them committed.
///
/// Two child tasks share the queue (an ``Outbox``), as in the http sink:
///
///     SinkInput ──▶ receiver: encode (COPY line), commit to queue, acknowledge ──▶ [queue] ──▶ writer: oldest batch first
///                      │ (count or interval reached)                                 ▲           BEGIN; COPY; latest; COMMIT
///                      └──────────────────────── OutboxSignal ───────────────────────┘           then delete from the queue
///
/// - Each position is encoded once, at commit: its payload is its line of COPY text for its
///   table (``PostgresRows``), so a batch is its records' payloads back to back.
/// - The writer connects at start and checks (or creates) the tables: a refused login or a table
///   of the wrong shape stops the sink with an error naming the option. A server that does not
///   answer is retried with backoff, logged at once and every 10 s while it lasts.
/// - A batch is one transaction (``PostgresSchema/Statements``); its records leave the queue only
///   after COMMIT returned. A batch cut off by a crash or a lost connection is written again; ids
///   already stored are skipped (`ON CONFLICT (id) DO NOTHING` on the staged path), so a position
///   is one row however often it is sent.
/// - A batch PostgreSQL refuses for a row's sake (a constraint, a value out of range: SQLSTATE
///   classes 22, 23, 54, P0) is split in halves until the refused rows stand alone; those go to the
///   dead letters and the rest is written.
public struct PostgresSink: PositionSink {
    let configuration: PostgresSinkConfiguration
    let context: ComponentContext
    let queue: any Outbox
    let writer: OutboxWriter
    let statements: PostgresSchema.Statements

    /// The outbox key of an event's record: a batch without events skips the events statement.
    static let eventKey = "e"

    init(configuration: PostgresSinkConfiguration, context: ComponentContext, outbox: any Outbox) {
        self.configuration = configuration
        self.context = context
        self.queue = outbox
        self.writer = OutboxWriter(outbox: outbox, mode: configuration.queue, context: context)
        statements = PostgresSchema.Statements(configuration.tables)
    }

    /// The JSON path of an option of this sink, for errors.
    func path(_ key: String) -> String { "sinks.\(context.id).\(key)" }

    public func run(input: any SinkInput) async throws {
        let signal = OutboxSignal()
        // Closed on every way out, so a clean exit leaves no WAL file behind.
        defer {
            writer.reportLeftOver()
            queue.close()
        }
        if queue.depth > 0 {
            context.logger.info("resuming with \(queue.depth) queued position(s)")
        }
        // A signal stops a durable queue's sink at once (``OutboxHalves``): what is not written stays queued.
        try await OutboxHalves.run(input: input, writer: writer, receive: {
            try await receive(input: input, signal: signal)
        }, deliver: {
            try await deliver(signal: signal)
        }, onFailure: {
            signal.post(ended: true, flushAll: true)
        })
    }

    // MARK: - Receiving

    private func receive(input: any SinkInput, signal: OutboxSignal) async throws {
        var unflushed = 0
        var firstUnflushed: ContinuousClock.Instant?
        let clock = ContinuousClock()
        var records: [OutboxEntry] = []
        let bounds = configuration.chinaBounds
        func intervalFlush() {
            if unflushed > 0 || queue.depth > 0 { signal.post(ended: false, flushAll: true) }
            unflushed = 0
            firstUnflushed = nil
        }
        while true {
            // A cancelled wait returns `.timeout` at once: without this check the loop would spin.
            try Task.checkCancellation()
            let wait = firstUnflushed.map { max(.milliseconds(1), configuration.interval - (clock.now - $0)) } ?? configuration.interval
            switch await input.next(timeout: wait) {
            case .positions(let batch):
                records.removeAll(keepingCapacity: true)
                for p in batch {
                    var line: [UInt8] = []
                    line.reserveCapacity(256)
                    if let event = p.event {
                        PostgresRows.appendEvent(p, event, bounds: bounds, to: &line)
                    } else {
                        PostgresRows.appendPosition(p, bounds: bounds, to: &line)
                    }
                    records.append(OutboxEntry(id: p.id, key: p.event == nil ? "" : Self.eventKey, payload: line, time: p.time?.milliseconds))
                }
                try await writer.commit(records, acknowledging: input)
                unflushed += batch.count
                if firstUnflushed == nil { firstUnflushed = clock.now }
                if unflushed >= configuration.maxPositions {
                    signal.post(ended: false, flushAll: false)
                    unflushed %= configuration.maxPositions
                    if unflushed == 0 { firstUnflushed = nil }
                }
                // A steady stream never lets `next` time out: the interval is checked here too.
                if let first = firstUnflushed, clock.now - first >= configuration.interval { intervalFlush() }
            case .timeout:
                intervalFlush()
                try await writer.writes.perform("drop expired positions", kind: "expiry", interval: Self.diskRetry) { try writer.dropExpired() }
            case .end:
                signal.post(ended: true, flushAll: true)
                return
            }
        }
    }

    // MARK: - Delivering

    /// The writer's connection and what it remembers of failures.
    struct Session {
        var connection: PostgresConnection?
        var backoff: Backoff
        /// When the current run of failures began; nil while writing works.
        var failingSince: ContinuousClock.Instant?
        /// A failure is logged at once, then at most every 10 s while failures last.
        var failureLog = Session.newFailureLog
        /// What `failureLog`'s times count from.
        let failureLogOrigin = ContinuousClock.now
        static var newFailureLog: LogRateLimit { LogRateLimit(intervalMilliseconds: 10_000) }
        var connections = 0
        /// Write through the temporary tables (skipping stored ids) until a batch has no stored ids:
        /// after a restart the first batches are often re-sent ones.
        var staged = false
        /// Records up to this seq are committed in PostgreSQL and not yet deleted from the queue:
        /// they are deleted while the next batch is written (an SQLite commit, a few ms, need not
        /// hold PostgreSQL up), or before the writer waits. A crash in between re-sends them, and
        /// their stored ids are skipped.
        var committedThrough: Int64?
    }

    private func deliver(signal: OutboxSignal) async throws {
        var session = Session(backoff: Backoff(initial: configuration.retryInitial, cap: configuration.retryMax, multiplier: 2, jitter: 0.2))
        defer {
            // Cancelled at the shutdown deadline (or failed): what was committed leaves the queue now.
            if let through = session.committedThrough { try? queue.remove(through: through) }
            session.connection?.close()
        }
        // One attempt now: a refused login or a wrong table is an error at start; a server that
        // does not answer is retried when there is something to write.
        if try await !connect(&session) {
            context.logger.warning("PostgreSQL does not answer; positions wait in the queue, connecting again when there are some to write")
        }
        // Positions still to write before waiting for a full batch again (see HTTPSink.upload).
        var flushRemaining = queue.depth
        var ended = false
        func take(_ s: OutboxSignal.Flags) {
            ended = ended || s.ended
            if s.flushAll { flushRemaining = max(flushRemaining, queue.depth) }
        }
        while true {
            try Task.checkCancellation()
            let records = try queue.records(after: session.committedThrough ?? 0, limit: configuration.maxPositions)
            guard !records.isEmpty else {
                try await removeCommitted(&session)
                if ended { return }
                flushRemaining = 0
                take(await signal.wait())
                try Task.checkCancellation()
                continue
            }
            if records.count >= configuration.maxPositions || flushRemaining > 0 || ended {
                try await write(records[...], &session, split: false)
                flushRemaining = max(0, flushRemaining - records.count)
                continue
            }
            try await removeCommitted(&session)
            take(await signal.wait())
            try Task.checkCancellation()
        }
    }

    /// How long to wait between attempts of a queue write that found the disk full.
    static let diskRetry: Duration = .seconds(1)

    /// Deletes what PostgreSQL committed from the queue, waiting out a full disk (``QueueWrites``):
    /// what PostgreSQL stored must not be written again for want of a delete.
    private func removeCommitted(_ session: inout Session) async throws {
        guard let through = session.committedThrough else { return }
        try await writer.writes.perform("delete positions written to PostgreSQL", kind: "delete", interval: Self.diskRetry) {
            try queue.remove(through: through)
        }
        session.committedThrough = nil
    }

    /// ``removeCommitted(_:)`` while a transaction is out: a full disk keeps the delete for the
    /// next chance instead of holding PostgreSQL up (`committedThrough` only grows).
    private func removeCommittedIfPossible(_ session: inout Session) throws {
        guard let through = session.committedThrough else { return }
        if try writer.writes.attempt("delete positions written to PostgreSQL", kind: "delete", { try queue.remove(through: through) }) {
            session.committedThrough = nil
        }
    }

    /// Writes `records` until they are committed or refused; a refused batch is split until the
    /// refused rows stand alone, and those are dead-lettered.
    private func write(_ records: ArraySlice<OutboxRecord>, _ session: inout Session, split: Bool) async throws {
        guard let last = records.last else { return }
        switch try await attempt(records, &session) {
        case .committed(let counts):
            if split {
                try await writer.writes.perform("delete positions written to PostgreSQL", kind: "delete", interval: Self.diskRetry) {
                    try queue.remove(through: last.seq)
                }
            } else {
                session.committedThrough = last.seq
            }
            let duplicates = records.count - counts.positions - counts.events
            context.stats.addEmitted(records.count)
            context.stats.count("postgres.sent", by: records.count)
            context.stats.count("postgres.transactions")
            if duplicates > 0 {
                context.stats.count("postgres.duplicates", by: duplicates)
                context.logger.debug("\(duplicates) of \(records.count) position(s) were stored before (re-sent)")
            }
        case .refused(let error):
            try await removeCommitted(&session)
            if records.count == 1, let record = records.first {
                try await writer.writes.perform("move a refused position to the dead letters", kind: "dead letters", interval: Self.diskRetry) {
                    try writer.deadLetter([record], status: 0, answer: "\(error)")
                }
                context.logger.error("PostgreSQL refused position \(record.id): \(error); moved to dead letters")
                return
            }
            if !split {
                context.logger.warning("PostgreSQL refused a batch of \(records.count) because of a row: \(error); writing it in parts to find the refused position(s)")
            }
            let middle = records.startIndex + records.count / 2
            try await write(records[..<middle], &session, split: true)
            try await write(records[middle...], &session, split: true)
        }
    }

    enum Attempt {
        case committed(PostgresSchema.BatchCounts)
        /// PostgreSQL refused a row of the batch for good.
        case refused(PostgresError)
    }

    /// One transaction for `records`, retried with backoff (reconnecting when needed) until it
    /// commits or PostgreSQL refuses a row.
    private func attempt(_ records: ArraySlice<OutboxRecord>, _ session: inout Session) async throws -> Attempt {
        var batch = PostgresSchema.Batch()
        var lines: [(id: String, line: [UInt8])] = []
        batch.positions.reserveCapacity(records.count * 220)
        for r in records {
            if r.key == Self.eventKey {
                batch.events += r.payload
            } else {
                batch.positions += r.payload
                lines.append((r.id, r.payload))
            }
        }
        batch.newest = PostgresRows.newestPerDevice(lines)
        let written = batch, statements = self.statements
        let timeout = operationTimeout
        while true {
            try Task.checkCancellation()
            guard let c = session.connection else {
                if try await !connect(&session) { try await context.clock.sleep(for: session.backoff.next()) }
                continue
            }
            do {
                let staged = session.staged
                async let result = blocking(c) {
                    try PostgresSchema.write(written, staged: staged, statements, on: c, timeout: timeout)
                }
                // The previous batch leaves the queue while this one is written.
                try removeCommittedIfPossible(&session)
                let counts = try await result
                recovered(&session)
                if staged, counts.positions + counts.events == records.count { session.staged = false }
                return .committed(counts)
            } catch let error as PostgresError {
                switch Self.classify(error) {
                case .row where error.sqlState == "23505" && !session.staged:
                    // A stored id (a re-sent position): the same batch again, skipping stored ids.
                    session.staged = true
                    context.logger.debug("batch of \(records.count) holds stored ids: writing it through the staging tables")
                    continue
                case .row:
                    return .refused(error)
                case .connection:
                    c.close()
                    session.connection = nil
                    noteFailure(&session, "lost the connection to PostgreSQL: \(error)")
                case .schema:
                    // The tables changed under the sink (dropped, altered, privileges revoked):
                    // connecting again checks them and stops the sink if they are wrong now.
                    c.close()
                    session.connection = nil
                    context.logger.error("PostgreSQL refused the batch: \(error); checking the tables again")
                    noteFailure(&session, "PostgreSQL refused the batch: \(error)", log: false)
                case .transient:
                    noteFailure(&session, "PostgreSQL could not take a batch of \(records.count): \(error)")
                }
                try await context.clock.sleep(for: session.backoff.next())
            }
        }
    }

    /// A deadline for one operation: the statement timeout and time to send and answer.
    var operationTimeout: Duration { configuration.statementTimeout + configuration.connectTimeout }

    /// Connects and prepares the tables. False when the server does not answer (noted, to retry);
    /// throws when it refuses the login or the tables are wrong.
    private func connect(_ session: inout Session) async throws -> Bool {
        let parameters = configuration.connectionParameters(applicationName: "locgate \(path("").dropLast())", connectTimeout: configuration.connectTimeout)
        let c: PostgresConnection
        do {
            c = try PostgresConnection(parameters: parameters)
        } catch {
            throw PostgresSinkError("\(path("url")): \(error)")
        }
        let connectTimeout = configuration.connectTimeout, tables = configuration.tables
        let createTables = configuration.createTables, statementTimeout = configuration.statementTimeout
        let timeout = operationTimeout
        do {
            try await blocking(c) { try c.connect(timeout: connectTimeout) }
            let preparation = try await blocking(c) {
                try PostgresSchema.prepare(c, tables, createTables: createTables, statementTimeout: statementTimeout, timeout: timeout)
            }
            switch preparation {
            case .problems(let problems):
                c.close()
                throw PostgresSinkError(problems.map { "\(path($0.key)): \($0.message)" }.joined(separator: "; "))
            case .ready(let created):
                for what in created { context.logger.info("created \(what)") }
            }
        } catch let error as PostgresError {
            c.close()
            switch error.kind {
            case .refused:
                throw PostgresSinkError("\(path("url")): PostgreSQL refused the connection: \(error)")
            case .statement where Self.classify(error) != .transient:
                throw PostgresSinkError("\(path("url")): cannot prepare the tables: \(error)")
            case .interrupted:
                throw CancellationError()
            default:
                noteFailure(&session, "cannot connect to PostgreSQL: \(error)")
                return false
            }
        }
        session.connection = c
        session.connections += 1
        context.stats.count("postgres.connects")
        let version = "\(c.serverVersion / 10000).\(c.serverVersion % 10000)"
        let tablesText = TableRole.allCases.map { tables.shown($0) }.joined(separator: ", ")
        if session.connections == 1 {
            context.logger.info("connected to \(c.server) (PostgreSQL \(version)); writing to \(tablesText)")
        } else {
            context.logger.debug("connected to \(c.server) again")
        }
        return true
    }

    // MARK: - Failures

    /// What a failed statement means for the batch.
    enum Failure: Equatable {
        /// A row PostgreSQL refuses for good: find it, dead-letter it.
        case row
        /// The connection is gone: connect again.
        case connection
        /// The tables or privileges are not what they were: check them again.
        case schema
        /// Try the same batch again later (a deadlock, a timeout, a server shutting down).
        case transient
    }

    static func classify(_ error: PostgresError) -> Failure {
        if error.breaksConnection { return .connection }
        guard let state = error.sqlState else { return .transient }
        switch state.prefix(2) {
        // Data exceptions, integrity constraints, program limits (a row too large), a trigger's RAISE.
        case "22", "23", "54", "P0": return .row
        // Undefined or wrong objects, privileges, read-only transactions, unsupported features.
        case "42", "25", "0A", "3F", "2B": return .schema
        default: return .transient
        }
    }

    /// Counts a failure and logs it at once, then at most every 10 s while failures last.
    private func noteFailure(_ session: inout Session, _ reason: String, log: Bool = true) {
        let now = ContinuousClock.now
        if session.failingSince == nil { session.failingSince = now }
        context.stats.count("postgres.retried")
        guard log else { return }
        if session.failureLog.allow("write", now: (now - session.failureLogOrigin).milliseconds) != nil {
            let since = session.failingSince.map { Int((now - $0).secondsDouble) } ?? 0
            context.logger.warning("\(reason); \(queue.depth) position(s) queued\(since > 0 ? ", failing for \(since) s" : ""); retrying with backoff up to \(DurationText.format(configuration.retryMax))")
        } else {
            context.logger.debug(reason)
        }
    }

    private func recovered(_ session: inout Session) {
        guard let since = session.failingSince else { return }
        let seconds = Int((ContinuousClock.now - since).secondsDouble)
        context.logger.info("PostgreSQL takes batches again after \(seconds) s; \(queue.depth) position(s) queued")
        session.failingSince = nil
        session.failureLog = Session.newFailureLog
        session.backoff.reset()
    }

    /// Runs a libpq call off the cooperative pool; cancelling the task interrupts its wait.
    private func blocking<T: Sendable>(_ c: PostgresConnection, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        let result: Result<T, any Error> = await withTaskCancellationHandler {
            await BlockingWork.run { () -> Result<T, any Error> in Result { try body() } }
        } onCancel: {
            c.interrupt()
        }
        switch result {
        case .success(let value): return value
        case .failure(let error as PostgresError) where error.kind == .interrupted: throw CancellationError()
        case .failure(let error): throw error
        }
    }
}
