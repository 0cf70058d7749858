import GatewayCore
import DeliveryEngine
import SystemIO

/// Writes positions into PostgreSQL/PostGIS in batches, from a queue that keeps them until the
/// transaction that stored them committed.
///
/// The sink is its configuration, its encoder and its transport (``PostgresTransport``) on the
/// shared per-batch delivery loop (``OutboxBatchLoop``, as the http sink), which owns backoff,
/// dead letters, expiry, full-disk retries of every queue write and throttled logging:
///
///     SinkInput ──▶ receiver: encode (COPY line), commit to queue, acknowledge ──▶ [queue] ──▶ sender: oldest batch first
///                      │ (count or interval reached)                                 ▲           PostgresTransport: BEGIN; COPY; latest; COMMIT
///                      └──────────────────────── OutboxSignal ───────────────────────┘           then delete from the queue
///
/// - Each position is encoded once, at commit: its payload is its line of COPY text for its
///   table (``PostgresRows``), so a batch is its records' payloads back to back.
/// - The transport connects at start and checks (or creates) the tables: a refused login or a
///   table of the wrong shape stops the sink with an error naming the option. A server that does
///   not answer is retried with the loop's backoff, logged at once and then every tenth attempt.
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
    let loop: OutboxBatchLoop

    /// The outbox key of an event's record: a batch without events skips the events statement.
    static let eventKey = "e"

    init(configuration: PostgresSinkConfiguration, context: ComponentContext, outbox: any Outbox) {
        self.configuration = configuration
        self.context = context
        self.queue = outbox
        loop = OutboxBatchLoop(writer: OutboxWriter(outbox: outbox, mode: configuration.queue, context: context), options: .init(
            maxRecords: configuration.maxPositions, maxBytes: .max, interval: configuration.interval,
            retryInitial: configuration.retryInitial, retryMax: configuration.retryMax, retryMaxAttempts: 0,
            // Re-sent ids are skipped by the table's key: a batch need not go again as it was.
            marksInFlight: false, statsPrefix: "postgres", diskRetry: Self.diskRetry, peer: "PostgreSQL"))
    }

    /// How long to wait between attempts of a queue write that found the disk full.
    static let diskRetry: Duration = .seconds(1)

    public func run(input: any SinkInput) async throws {
        // Closed on every way out, so a clean exit leaves no WAL file behind.
        defer { queue.close() }
        let transport = PostgresTransport(configuration: configuration, context: context, queue: queue)
        let bounds = configuration.chinaBounds
        do {
            try await loop.run(input: input, transport: transport) {
                { p in
                    var line: [UInt8] = []
                    line.reserveCapacity(256)
                    if let event = p.event {
                        PostgresRows.appendEvent(p, event, bounds: bounds, to: &line)
                    } else {
                        PostgresRows.appendPosition(p, bounds: bounds, to: &line)
                    }
                    return OutboxEntry(id: p.id, key: p.event == nil ? "" : Self.eventKey, payload: line, time: p.time?.milliseconds)
                }
            }
        } catch {
            await transport.close()
            throw error
        }
        await transport.close()
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
}
