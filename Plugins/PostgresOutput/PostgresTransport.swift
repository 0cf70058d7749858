import GatewayCore
import DeliveryEngine
import SystemIO

/// The half of the postgres sink that talks to PostgreSQL: one transaction per batch on one
/// connection, for ``OutboxBatchLoop`` (which retries, dead-letters and deletes).
///
/// - ``start()`` connects and checks (or creates) the tables: a refused login or a wrong table
///   throws (the sink stops with an error naming the option); a server that does not answer is a
///   warning, and the first batch connects again.
/// - ``send(_:records:)`` answers `.retry` for a lost connection, a server that does not answer,
///   or a transient refusal (the loop backs off and sends the same batch again); after a lost
///   connection the next send connects again, which checks the tables again.
/// - A batch holding ids stored before (a re-send after a crash or a lost COMMIT answer) is
///   written again at once through the staging tables, which skip them.
/// - A batch refused for a row's sake is written in halves until the refused rows stand alone:
///   the halves PostgreSQL takes are committed, the refused rows come back to the loop
///   (`.acceptedExcept`) for the dead letters. When a half fails for another reason, the whole
///   batch is retried (its stored rows are then skipped).
actor PostgresTransport: OutboxBatchTransport {
    let configuration: PostgresSinkConfiguration
    let context: ComponentContext
    let queue: any Outbox
    let statements: PostgresSchema.Statements
    private var connection: PostgresConnection?
    private var connections = 0
    /// Write through the temporary tables (skipping stored ids) until a batch has no stored ids:
    /// after a restart the first batches are often re-sent ones.
    private var staged = false
    /// When the current run of failures began; nil while writing works.
    private var failingSince: ContinuousClock.Instant?

    init(configuration: PostgresSinkConfiguration, context: ComponentContext, queue: any Outbox) {
        self.configuration = configuration
        self.context = context
        self.queue = queue
        statements = PostgresSchema.Statements(configuration.tables)
    }

    /// The JSON path of an option of this sink, for errors.
    nonisolated func path(_ key: String) -> String { "sinks.\(context.id).\(key)" }

    func start() async throws {
        // One attempt now: a refused login or a wrong table is an error at start; a server that
        // does not answer is retried when there is something to write.
        if let failure = try await connect() {
            noteFailure()
            context.stats.count("postgres.retried")
            context.logger.warning(failure)
            context.logger.warning("PostgreSQL does not answer; positions wait in the queue, connecting again when there are some to write")
        }
    }

    func close() {
        connection?.close()
        connection = nil
    }

    nonisolated func encode(_ records: [OutboxRecord]) -> (batch: PostgresSchema.Batch, count: Int) {
        (Self.batch(records[...]), records.count)
    }

    /// The COPY data of `records` and the ids of each device's newest fix among them.
    static func batch(_ records: ArraySlice<OutboxRecord>) -> PostgresSchema.Batch {
        var batch = PostgresSchema.Batch()
        var lines: [(id: String, line: [UInt8])] = []
        batch.positions.reserveCapacity(records.count * 220)
        for r in records {
            if r.key == PostgresSink.eventKey {
                batch.events += r.payload
            } else {
                batch.positions += r.payload
                lines.append((r.id, r.payload))
            }
        }
        batch.newest = PostgresRows.newestPerDevice(lines)
        return batch
    }

    func send(_ batch: PostgresSchema.Batch, records: [OutboxRecord]) async throws -> OutboxBatchOutcome {
        switch try await attempt(batch, count: records.count) {
        case .committed(let counts):
            committed(counts, records: records.count)
            return .accepted
        case .failed(let reason):
            return .retry(reason: reason, after: nil, status: 0, answer: "")
        case .refused(let error):
            guard records.count > 1 else {
                return .acceptedExcept(refused: records.map { OutboxRecordRefusal(record: $0, status: 0, answer: "\(error)") })
            }
            context.logger.warning("PostgreSQL refused a batch of \(records.count) because of a row: \(error); writing it in parts to find the refused position(s)")
            var refused: [OutboxRecordRefusal] = []
            if let failure = try await split(records[...], refused: &refused) {
                return .retry(reason: failure, after: nil, status: 0, answer: "")
            }
            return .acceptedExcept(refused: refused)
        }
    }

    /// Writes the halves of a batch refused for a row's sake, each split again while it is
    /// refused, until the refused rows stand alone (collected in `refused`). Returns why a half
    /// failed for another reason (the whole batch is then tried again), nil when all is settled.
    private func split(_ records: ArraySlice<OutboxRecord>, refused: inout [OutboxRecordRefusal]) async throws -> String? {
        let middle = records.startIndex + records.count / 2
        for half in [records[..<middle], records[middle...]] {
            switch try await attempt(Self.batch(half), count: half.count) {
            case .committed(let counts):
                committed(counts, records: half.count)
            case .failed(let reason):
                return reason
            case .refused(let error):
                if half.count == 1, let record = half.first {
                    refused.append(OutboxRecordRefusal(record: record, status: 0, answer: "\(error)"))
                } else if let failure = try await split(half, refused: &refused) {
                    return failure
                }
            }
        }
        return nil
    }

    private func committed(_ counts: PostgresSchema.BatchCounts, records: Int) {
        let duplicates = records - counts.positions - counts.events
        context.stats.count("postgres.transactions")
        if duplicates > 0 {
            context.stats.count("postgres.duplicates", by: duplicates)
            context.logger.debug("\(duplicates) of \(records) position(s) were stored before (re-sent)")
        }
    }

    enum Attempt {
        case committed(PostgresSchema.BatchCounts)
        /// PostgreSQL refused a row of the batch for good.
        case refused(PostgresError)
        /// Not written, may work later: why.
        case failed(String)
    }

    /// One transaction for `batch` (connecting first when needed).
    private func attempt(_ batch: PostgresSchema.Batch, count: Int) async throws -> Attempt {
        let statements = self.statements, timeout = operationTimeout
        while true {
            try Task.checkCancellation()
            guard let c = connection else {
                if let failure = try await connect() {
                    noteFailure()
                    return .failed(failure)
                }
                continue
            }
            do {
                let staged = self.staged
                let counts = try await blocking(c) {
                    try PostgresSchema.write(batch, staged: staged, statements, on: c, timeout: timeout)
                }
                recovered()
                if staged, counts.positions + counts.events == count { self.staged = false }
                return .committed(counts)
            } catch let error as PostgresError {
                switch PostgresSink.classify(error) {
                case .row where error.sqlState == "23505" && !staged:
                    // A stored id (a re-sent position): the same batch again, skipping stored ids.
                    self.staged = true
                    context.logger.debug("batch of \(count) holds stored ids: writing it through the staging tables")
                    continue
                case .row:
                    return .refused(error)
                case .connection:
                    close()
                    noteFailure()
                    return .failed("lost the connection to PostgreSQL: \(error)")
                case .schema:
                    // The tables changed under the sink (dropped, altered, privileges revoked):
                    // connecting again checks them and stops the sink if they are wrong now.
                    close()
                    noteFailure()
                    context.logger.error("PostgreSQL refused the batch: \(error); checking the tables again")
                    return .failed("PostgreSQL refused the batch: \(error)")
                case .transient:
                    noteFailure()
                    return .failed("PostgreSQL could not take a batch of \(count): \(error)")
                }
            }
        }
    }

    /// A deadline for one operation: the statement timeout and time to send and answer.
    var operationTimeout: Duration { configuration.statementTimeout + configuration.connectTimeout }

    /// Connects and prepares the tables. Returns why when the server does not answer (to retry);
    /// throws when it refuses the login or the tables are wrong.
    private func connect() async throws -> String? {
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
            case .statement where PostgresSink.classify(error) != .transient:
                throw PostgresSinkError("\(path("url")): cannot prepare the tables: \(error)")
            case .interrupted:
                throw CancellationError()
            default:
                return "cannot connect to PostgreSQL: \(error)"
            }
        }
        connection = c
        connections += 1
        context.stats.count("postgres.connects")
        let version = "\(c.serverVersion / 10000).\(c.serverVersion % 10000)"
        let tablesText = TableRole.allCases.map { tables.shown($0) }.joined(separator: ", ")
        if connections == 1 {
            context.logger.info("connected to \(c.server) (PostgreSQL \(version)); writing to \(tablesText)")
        } else {
            context.logger.debug("connected to \(c.server) again")
        }
        return nil
    }

    // MARK: - Failures

    /// Notes when a run of failures began (for the line that says it ended); the loop logs and
    /// counts each retry, the connection at start is counted here.
    private func noteFailure() {
        if failingSince == nil { failingSince = ContinuousClock.now }
    }

    private func recovered() {
        guard let since = failingSince else { return }
        let seconds = Int((ContinuousClock.now - since).secondsDouble)
        context.logger.info("PostgreSQL takes batches again after \(seconds) s; \(queue.depth) position(s) queued")
        failingSince = nil
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
