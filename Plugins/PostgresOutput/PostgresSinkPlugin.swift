import GatewayCore
import Geodesy
import DeliveryEngine
import SystemIO
import EnvironmentChecks

/// The `postgres` sink: writes positions into PostGIS tables from a durable (SQLite) or memory queue.
public enum PostgresSinkPlugin: SinkPlugin {
    public static let connectTimeout = Option("connect_timeout", default: Duration.seconds(10), minimum: .milliseconds(100),
        "Longest wait for a connection (TCP, TLS and login); then retried with backoff.")
    public static let statementTimeout = Option("statement_timeout", default: Duration.seconds(30), minimum: .milliseconds(100),
        "PostgreSQL's statement_timeout for the sink's session; a batch that takes longer is rolled back and retried.")
    public static let schema = Option("schema", default: "public",
        "Schema of the three tables (created with them when missing).")
    public static let positionsTable = Option("tables.positions", default: "positions",
        "Table of every position, one row per id.")
    public static let latestTable = Option("tables.latest", default: "latest",
        "Table of each device's newest fix, one row per device.")
    public static let eventsTable = Option("tables.events", default: "events",
        "Table of geofence and receiver-health events.")
    public static let createTables = Option("create_tables", default: true,
        "Create missing tables (and their indexes, the schema, and the postgis extension when the user may); false only checks them. Existing tables are checked either way and never altered.")
    public static let chinaBounds = Option("china_bounds", default: ChinaBounds.box,
        "Where GCJ-02 applies when GCJ-02 and BD-09 positions are converted back to WGS84 for geom; match the coordinates transform's china_bounds.")
    public static let maxPositions = Option("batch.max_positions", default: 1000, in: 1...100_000,
        "Write when this many positions are queued (and never more per transaction).")
    public static let interval = Option("batch.interval", default: Duration.seconds(1), minimum: .milliseconds(10),
        "Write what is queued this long after the first unwritten position arrived, even if the batch is not full.")
    public static let retryInitial = Option("retry.initial", default: Duration.milliseconds(500), minimum: .milliseconds(1),
        "First delay after a failed connection or transaction; doubles per attempt (±20% jitter).")
    public static let retryMax = Option("retry.max", default: Duration.seconds(30), minimum: .milliseconds(1),
        "Longest retry delay.")

    static let sslModes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

    public static let info = PluginInfo(
        type: "postgres", kind: .sink,
        summary: "Writes positions into PostgreSQL/PostGIS tables (positions, latest, events) in batches from a durable queue; deletes them from the queue only after COMMIT.",
        folder: "PostgresOutput",
        options: [
            OptionSpec("url", "string", default: "libpq's PG* environment", "libpq connection string: postgresql://USER@HOST:PORT/DATABASE?sslmode=… or key=value pairs; ${ENV} allowed, a password in it through ${secret:NAME}. Left out, libpq reads PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE…"),
            OptionSpec("password", "string", default: "none", "Password (use ${secret:NAME}); overrides one in url, PGPASSWORD and ~/.pgpass. Never logged."),
            OptionSpec("sslmode", "disable | allow | prefer | require | verify-ca | verify-full", default: "from url or PGSSLMODE, else prefer", "TLS to the server; verify-full checks the certificate and the host name."),
            OptionSpec("sslrootcert", "path", default: "from url, else ~/.postgresql/root.crt", "PEM file of the CA certificates that sign the server's certificate (for verify-ca / verify-full)."),
            connectTimeout.spec,
            statementTimeout.spec,
            schema.spec,
            positionsTable.spec,
            latestTable.spec,
            eventsTable.spec,
            createTables.spec,
            chinaBounds.spec,
            maxPositions.spec,
            interval.spec,
            retryInitial.spec,
            retryMax.spec,
        ] + OutboxOptions.specs,
        sample: #"{ "type": "postgres", "inputs": ["receiver"], "url": "postgresql://locgate@127.0.0.1:5432/tracks?sslmode=prefer", "password": "${secret:TRACKS_PASSWORD:-}", "queue": { "path": "postgres-outbox.sqlite" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> PostgresSinkConfiguration {
        var c = PostgresSinkConfiguration()
        if let url = options.string("url") {
            if url.isEmpty {
                options.report("url", "must not be empty (leave url out to use libpq's PG* environment variables)")
            } else {
                Redaction.registerCredentials(inURL: url)
                switch PostgresConnection.parse(connectionString: url) {
                case .success(let pairs):
                    if let password = pairs["password"] { Redaction.register(password) }
                    c.url = url
                case .failure(let e):
                    options.report("url", "not a libpq connection string (postgresql://USER@HOST:PORT/DATABASE or key=value pairs): \(e.message)")
                }
            }
        }
        c.password = options.secretString("password")
        if options.has("sslmode") { c.sslMode = options.choice("sslmode", sslModes, default: "prefer") }
        c.sslRootCert = options.filePath("sslrootcert")
        c.connectTimeout = options.read(connectTimeout)
        c.statementTimeout = options.read(statementTimeout)

        func identifier(_ reader: inout OptionReader, _ option: Option<String>) -> String {
            let name = reader.read(option)
            if name.isEmpty {
                reader.report(option.key, "must not be empty")
                return option.defaultValue
            }
            // PostgreSQL cuts longer names silently: the checks would look for a table that never exists.
            if name.utf8.count > 63 {
                reader.report(option.key, "PostgreSQL names are at most 63 bytes, got \(name.utf8.count)")
                return option.defaultValue
            }
            return name
        }
        c.tables.schema = identifier(&options, schema)
        if var tables = options.object("tables") {
            c.tables.positions = identifier(&tables, positionsTable)
            c.tables.latest = identifier(&tables, latestTable)
            c.tables.events = identifier(&tables, eventsTable)
            let names = TableRole.allCases.map { c.tables.name($0) }
            if Set(names).count < names.count {
                tables.report("", "the three tables need three names, got \(names.joined(separator: ", "))")
            }
            tables.finish()
        }
        c.createTables = options.read(createTables)
        c.chinaBounds = options.read(chinaBounds)

        if var batch = options.object("batch") {
            c.maxPositions = batch.read(maxPositions)
            c.interval = batch.read(interval)
            batch.finish()
        }
        if var retry = options.object("retry") {
            c.retryInitial = retry.read(retryInitial)
            c.retryMax = retry.read(retryMax)
            if c.retryMax < c.retryInitial { retry.report("max", "must be at least retry.initial (\(DurationText.format(c.retryInitial)))") }
            retry.finish()
        }
        c.queue = OutboxOptions.read(&options)
        return c
    }

    public static func makeSink(_ configuration: PostgresSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        if let path = configuration.sslRootCert, let problem = FileCheck.readProblem(path) {
            throw PostgresSinkError("sinks.\(context.id).sslrootcert: \(problem)")
        }
        return PostgresSink(configuration: configuration, context: context, outbox: try OutboxOptions.open(configuration.queue, context: context))
    }
}

extension PostgresSinkPlugin {
    /// The queue and sslrootcert usable (errors: the sink would not start); then the database,
    /// within the peer timeout: a login it refuses and every problem with PostGIS, the schema and
    /// the tables are errors (they stop the sink at start too); a server that does not answer is a
    /// warning (positions wait in the queue until it does).
    public static func checkEnvironment(_ configuration: PostgresSinkConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings = OutboxOptions.checkEnvironment(configuration.queue, context: context)
        if let path = configuration.sslRootCert, let problem = FileCheck.readProblem(path) {
            findings.append(context.error("sslrootcert", problem))
            return findings
        }
        let timeout = min(context.peerTimeout, configuration.connectTimeout)
        do {
            let c = try PostgresConnection(parameters: configuration.connectionParameters(applicationName: "locgate validate", connectTimeout: timeout))
            defer { c.close() }
            try c.connect(timeout: timeout)
            let inspection = try PostgresSchema.inspect(c, configuration.tables, createTables: configuration.createTables, timeout: max(timeout, .seconds(5)))
            findings += inspection.problems.map { context.error($0.key, $0.message) }
            if inspection.problems.isEmpty {
                if inspection.postgisMissing {
                    findings.append(context.info("create_tables", "PostGIS is not enabled in database \(inspection.database); the sink enables it at start"))
                }
                for role in inspection.missing {
                    findings.append(context.info(role.option, "table \(configuration.tables.shown(role)) does not exist yet; the sink creates it at start"))
                }
            }
        } catch {
            switch error.kind {
            case .refused:
                findings.append(context.error("url", "PostgreSQL refused the connection: \(error)"))
            case .statement:
                findings.append(context.error("url", "cannot check the tables: \(error)"))
            case .unreachable, .unavailable, .timedOut, .lost, .interrupted:
                findings.append(context.warning("url", "PostgreSQL is not reachable now: \(error); positions wait in the queue until it is"))
            }
        }
        return findings
    }
}

/// A failure of the `postgres` sink that retrying cannot fix: a refused login, a table of the wrong shape.
public struct PostgresSinkError: Error, CustomStringConvertible, Sendable {
    public var message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
