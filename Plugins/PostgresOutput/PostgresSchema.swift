import GatewayCore

/// Where the sink writes: a schema and the names of its three tables.
public struct PostgresTables: Sendable, Equatable {
    public var schema = PostgresSinkPlugin.schema.defaultValue
    public var positions = PostgresSinkPlugin.positionsTable.defaultValue
    public var latest = PostgresSinkPlugin.latestTable.defaultValue
    public var events = PostgresSinkPlugin.eventsTable.defaultValue

    public init() {}

    /// The table of `role`.
    func name(_ role: TableRole) -> String {
        switch role {
        case .positions: positions
        case .latest: latest
        case .events: events
        }
    }

    /// `"schema"."table"`, quoted.
    func qualified(_ role: TableRole) -> String { PostgresSchema.quote(schema) + "." + PostgresSchema.quote(name(role)) }

    /// `schema.table` as people write it, for messages.
    func shown(_ role: TableRole) -> String { "\(schema).\(name(role))" }
}

/// The three tables the sink fills.
enum TableRole: String, CaseIterable, Sendable {
    case positions, latest, events

    /// The option that names it, which is also the JSON path of its problems.
    var option: String { "tables.\(rawValue)" }

    /// The column `ON CONFLICT` names: a primary key or a unique index on it is required.
    var conflictColumn: String { self == .latest ? "device" : "id" }

    /// Privileges the sink needs: INSERT … ON CONFLICT DO UPDATE … WHERE also reads the row.
    var privileges: [String] { self == .latest ? ["INSERT", "UPDATE", "SELECT"] : ["INSERT"] }
}

/// A problem with the database or a table, at the option it concerns (`url`, `tables.latest`).
struct SchemaProblem: Sendable, Equatable, CustomStringConvertible {
    var key: String
    var message: String
    var description: String { "\(key): \(message)" }
}

/// The table layout (one for every database: documented in the README), its checks, and the SQL
/// the sink runs (``Statements``).
enum PostgresSchema {
    /// A column the sink writes: its name, its type when the sink creates the table, and the
    /// types (as `format_type` prints them) an existing table may have instead.
    struct Column: Sendable {
        var name: String
        var create: String
        var accepted: [String]

        init(_ name: String, _ create: String, accepting accepted: [String]? = nil) {
            self.name = name
            self.create = create
            self.accepted = accepted ?? [create.replacingOccurrences(of: " NOT NULL", with: "").replacingOccurrences(of: " PRIMARY KEY", with: "")]
        }

        /// The type as an existing table must have it, for messages.
        var expected: String { accepted[0] }

        func accepts(_ type: String) -> Bool {
            accepted.contains { type == $0 || ($0.hasSuffix("(") && type.hasPrefix($0)) }
        }
    }

    static let geometryType = "geometry(PointZ,4326)"
    static let textTypes = ["text", "character varying", "character varying("]
    static let integerTypes = ["smallint", "integer", "bigint"]
    static let geometryTypes = [geometryType, "geometry"]

    /// Columns shared by the three tables: where the fix is, and its coordinates as given.
    static let placeColumns: [Column] = [
        Column("geom", "geometry(PointZ, 4326)", accepting: geometryTypes),
        Column("datum", "text NOT NULL", accepting: textTypes),
        Column("datum_x", "double precision"),
        Column("datum_y", "double precision"),
        Column("attributes", "jsonb"),
    ]

    static let measurementColumns: [Column] = [
        Column("altitude", "double precision"),
        Column("speed", "double precision"),
        Column("track", "double precision"),
        Column("hdop", "double precision"),
        Column("eph", "double precision"),
        Column("mode", "smallint", accepting: integerTypes),
        Column("status", "smallint", accepting: integerTypes),
        Column("satellites", "smallint", accepting: integerTypes),
    ]

    static func columns(_ role: TableRole) -> [Column] {
        switch role {
        case .positions:
            [Column("id", "text PRIMARY KEY", accepting: textTypes), Column("device", "text NOT NULL", accepting: textTypes),
             Column("source", "text NOT NULL", accepting: textTypes), Column("time", "timestamp with time zone")]
                + [placeColumns[0]] + measurementColumns + placeColumns.dropFirst()
        case .latest:
            [Column("device", "text PRIMARY KEY", accepting: textTypes), Column("id", "text NOT NULL", accepting: textTypes),
             Column("source", "text NOT NULL", accepting: textTypes), Column("time", "timestamp with time zone NOT NULL", accepting: ["timestamp with time zone"]),
             Column("geom", "geometry(PointZ, 4326) NOT NULL", accepting: geometryTypes)]
                + measurementColumns + placeColumns.dropFirst()
        case .events:
            [Column("id", "text PRIMARY KEY", accepting: textTypes), Column("position_id", "text", accepting: textTypes),
             Column("device", "text NOT NULL", accepting: textTypes), Column("source", "text NOT NULL", accepting: textTypes),
             Column("time", "timestamp with time zone"), Column("type", "text NOT NULL", accepting: textTypes),
             Column("fence", "text", accepting: textTypes), Column("fence_name", "text", accepting: textTypes),
             Column("antenna", "text", accepting: textTypes)]
                + placeColumns
        }
    }

    /// `"name"` with embedded quotes doubled.
    static func quote(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// CREATE TABLE and its indexes, for a table that does not exist.
    static func createStatements(_ role: TableRole, _ tables: PostgresTables) -> [String] {
        let table = tables.qualified(role)
        let columns = Self.columns(role).map { "    \(quote($0.name)) \($0.create)" }.joined(separator: ",\n")
        var statements = ["CREATE TABLE IF NOT EXISTS \(table) (\n\(columns)\n)"]
        let base = tables.name(role)
        func index(_ suffix: String, _ definition: String) -> String {
            // Index names share the table's schema; PostgreSQL truncates them at 63 bytes.
            "CREATE INDEX IF NOT EXISTS \(quote(base + "_" + suffix)) ON \(table) \(definition)"
        }
        switch role {
        case .positions, .events:
            statements.append(index("device_time", "(\(quote("device")), \(quote("time")))"))
            statements.append(index("geom", "USING gist (\(quote("geom")))"))
        case .latest:
            statements.append(index("geom", "USING gist (\(quote("geom")))"))
        }
        return statements
    }

    // MARK: - Batches

    /// The statements of a batch for one set of tables, made once.
    ///
    /// A batch is one transaction. Its lines are copied straight into `positions` and `events`
    /// (`COPY … FROM STDIN`: as fast as `psql \copy`). A line whose id is stored already (a
    /// position re-sent after a crash or a lost COMMIT) fails that COPY with a unique violation;
    /// the batch is then written again through temporary tables and `INSERT … SELECT … ON
    /// CONFLICT (id) DO NOTHING`, which skips stored ids (half the speed, so only when needed).
    /// `latest` takes each device's newest fix of the batch, read back by id, when it is newer
    /// than the stored one.
    struct Statements: Sendable {
        var copyPositions: String
        var copyEvents: String
        var stagePositions: String
        var stageEvents: String
        var insertStagedPositions: String
        var insertStagedEvents: String
        var createStaging: String
        var upsertLatest: String

        init(_ tables: PostgresTables) {
            func names(_ role: TableRole) -> String { columns(role).map { quote($0.name) }.joined(separator: ", ") }
            func staging(_ role: TableRole) -> String { "locgate_\(role.rawValue)" }
            copyPositions = "COPY \(tables.qualified(.positions)) (\(names(.positions))) FROM STDIN"
            copyEvents = "COPY \(tables.qualified(.events)) (\(names(.events))) FROM STDIN"
            stagePositions = "COPY pg_temp.\(staging(.positions)) FROM STDIN"
            stageEvents = "COPY pg_temp.\(staging(.events)) FROM STDIN"
            insertStagedPositions = """
                INSERT INTO \(tables.qualified(.positions)) (\(names(.positions)))
                SELECT \(names(.positions)) FROM pg_temp.\(staging(.positions)) ON CONFLICT (\(quote("id"))) DO NOTHING
                """
            insertStagedEvents = """
                INSERT INTO \(tables.qualified(.events)) (\(names(.events)))
                SELECT \(names(.events)) FROM pg_temp.\(staging(.events)) ON CONFLICT (\(quote("id"))) DO NOTHING
                """
            // Same columns and types as the tables, without constraints; emptied at every COMMIT and ROLLBACK.
            createStaging = [TableRole.positions, .events].map { role in
                let columns = PostgresSchema.columns(role).map { c in
                    "\(quote(c.name)) \(c.create.replacingOccurrences(of: " PRIMARY KEY", with: "").replacingOccurrences(of: " NOT NULL", with: ""))"
                }
                return "CREATE TEMPORARY TABLE IF NOT EXISTS \(staging(role)) (\(columns.joined(separator: ", "))) ON COMMIT DELETE ROWS"
            }.joined(separator: ";\n")
            let latest = columns(.latest).map { quote($0.name) }
            let updates = latest.dropFirst().map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
            upsertLatest = """
                INSERT INTO \(tables.qualified(.latest)) AS stored (\(latest.joined(separator: ", ")))
                SELECT DISTINCT ON (\(quote("device"))) \(latest.joined(separator: ", ")) FROM \(tables.qualified(.positions))
                WHERE \(quote("id")) = ANY($1::text[]) AND \(quote("time")) IS NOT NULL AND \(quote("geom")) IS NOT NULL
                ORDER BY \(quote("device")), \(quote("time")) DESC, \(quote("id")) DESC
                ON CONFLICT (\(quote("device"))) DO UPDATE SET \(updates)
                WHERE stored.\(quote("time")) < EXCLUDED.\(quote("time"))
                """
        }
    }

    /// What one batch changed.
    struct BatchCounts: Sendable, Equatable {
        /// Rows new to `positions` (the rest were stored before: re-sent positions).
        var positions = 0
        /// Devices whose `latest` row this batch replaced or created.
        var latest = 0
        /// Rows new to `events`.
        var events = 0
    }

    /// One batch: `positions` and `events` lines (``PostgresRows``), and the ids of the lines
    /// that are each device's newest fix in it.
    struct Batch: Sendable {
        var positions: [UInt8] = []
        var events: [UInt8] = []
        var newest: [String] = []
    }

    /// Writes one batch in one transaction (see ``Statements``), straight or `staged` (through the
    /// temporary tables, skipping stored ids). Returns only once COMMIT returned; on an error the
    /// transaction is rolled back (or died with the connection) and nothing of the batch is stored.
    static func write(_ batch: Batch, staged: Bool, _ sql: Statements, on c: PostgresConnection, timeout: Duration) throws(PostgresError) -> BatchCounts {
        try c.execute("BEGIN", timeout: timeout)
        do {
            var counts = BatchCounts()
            if !batch.positions.isEmpty {
                if staged {
                    _ = try c.copy(sql.stagePositions, data: batch.positions, timeout: timeout)
                    counts.positions = try c.execute(sql.insertStagedPositions, timeout: timeout).last?.affected ?? 0
                } else {
                    counts.positions = try c.copy(sql.copyPositions, data: batch.positions, timeout: timeout)
                }
            }
            if !batch.events.isEmpty {
                if staged {
                    _ = try c.copy(sql.stageEvents, data: batch.events, timeout: timeout)
                    counts.events = try c.execute(sql.insertStagedEvents, timeout: timeout).last?.affected ?? 0
                } else {
                    counts.events = try c.copy(sql.copyEvents, data: batch.events, timeout: timeout)
                }
            }
            if !batch.newest.isEmpty {
                counts.latest = try c.query(sql.upsertLatest, [arrayLiteral(batch.newest)], timeout: timeout).affected
            }
            try c.execute("COMMIT", timeout: timeout)
            return counts
        } catch {
            if c.isUsable { _ = try? c.execute("ROLLBACK", timeout: timeout) }
            throw error
        }
    }

    /// A `text[]` literal: `{"a","b"}` with `"` and `\` escaped.
    static func arrayLiteral(_ items: [String]) -> String {
        "{" + items.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }.joined(separator: ",") + "}"
    }

    /// A connection ready for batches, or what is wrong with the database.
    enum Preparation: Sendable {
        /// Ready; what was created on the way (`table public.positions`), for the log.
        case ready(created: [String])
        case problems([SchemaProblem])
    }

    /// Makes a new connection ready for batches: sets the statement timeout, checks the database
    /// and the tables, creates what is missing when `createTables` allows it (then checks again),
    /// and creates the session's staging table. Changes nothing when there are problems.
    static func prepare(_ c: PostgresConnection, _ tables: PostgresTables, createTables: Bool, statementTimeout: Duration,
                        timeout: Duration) throws(PostgresError) -> Preparation {
        try c.execute("SET statement_timeout = \(max(1, statementTimeout.milliseconds))", timeout: timeout)
        var inspection = try inspect(c, tables, createTables: createTables, timeout: timeout)
        guard inspection.problems.isEmpty else { return .problems(inspection.problems) }
        var created: [String] = []
        if inspection.postgisMissing {
            try c.execute("CREATE EXTENSION IF NOT EXISTS postgis", timeout: timeout)
            created.append("extension postgis")
        }
        if !inspection.missing.isEmpty {
            // One creator at a time: two gateways starting together must not both create a table.
            var statements = ["BEGIN", "SELECT pg_advisory_xact_lock(hashtext('locgate.tables'))"]
            if inspection.schemaMissing {
                statements.append("CREATE SCHEMA IF NOT EXISTS \(quote(tables.schema))")
                created.append("schema \(tables.schema)")
            }
            for role in inspection.missing {
                statements += createStatements(role, tables)
                created.append("table \(tables.shown(role))")
            }
            statements.append("COMMIT")
            do {
                try c.execute(statements.joined(separator: ";\n"), timeout: timeout)
            } catch {
                if c.isUsable { _ = try? c.execute("ROLLBACK", timeout: timeout) }
                throw error
            }
            // What was created passes the same checks as what was found.
            inspection = try inspect(c, tables, createTables: false, timeout: timeout)
            guard inspection.problems.isEmpty else { return .problems(inspection.problems) }
        }
        try c.execute(Statements(tables).createStaging, timeout: timeout)
        return .ready(created: created)
    }

    // MARK: - Checks

    /// What the database looks like to the sink's user, found without changing anything.
    struct Inspection: Sendable {
        var problems: [SchemaProblem] = []
        /// Tables that do not exist and will be created (`create_tables`).
        var missing: [TableRole] = []
        var schemaMissing = false
        /// PostGIS is available on the server but not enabled in the database (`create_tables` enables it).
        var postgisMissing = false
        var user = ""
        var database = ""
    }

    /// Checks the database, the schema and each table: PostGIS, writability, privileges, every
    /// column with its type, the unique index `ON CONFLICT` needs, and columns the sink does not
    /// fill that would refuse every row. Every problem is collected.
    static func inspect(_ c: PostgresConnection, _ tables: PostgresTables, createTables: Bool, timeout: Duration) throws(PostgresError) -> Inspection {
        var out = Inspection()
        let overview = try c.query("""
            SELECT current_user, current_database(), current_setting('transaction_read_only'),
                   to_regtype('geometry') IS NOT NULL,
                   EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'postgis'),
                   coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false),
                   has_database_privilege(current_database(), 'TEMPORARY'),
                   has_database_privilege(current_database(), 'CREATE'),
                   (SELECT oid FROM pg_namespace WHERE nspname = $1)
            """, [tables.schema], timeout: timeout)
        guard let row = overview.rows.first, row.count == 9 else {
            throw PostgresError(.statement, message: "the server answered the catalog query with nothing")
        }
        let user = row[0] ?? "?", database = row[1] ?? "?"
        out.user = user
        out.database = database
        func yes(_ i: Int) -> Bool { row[i] == "t" || row[i] == "on" }
        if yes(2) {
            out.problems.append(SchemaProblem(key: "url", message: "database \(database) accepts no writes (transaction_read_only is on: a standby, or default_transaction_read_only set for user \(user) or the database)"))
        }
        if !yes(3) {
            if !createTables {
                out.problems.append(SchemaProblem(key: "url", message: "PostGIS is not enabled in database \(database): run CREATE EXTENSION postgis; there (or set create_tables: true)"))
            } else if !yes(4) {
                out.problems.append(SchemaProblem(key: "url", message: "PostGIS is not installed on the server of database \(database) (on Debian: apt install postgresql-15-postgis-3)"))
            } else if !yes(5) {
                out.problems.append(SchemaProblem(key: "url", message: "PostGIS is not enabled in database \(database) and user \(user) may not enable it: run CREATE EXTENSION postgis; as a superuser"))
            } else {
                out.postgisMissing = true
            }
        }
        if !yes(6) {
            out.problems.append(SchemaProblem(key: "url", message: "user \(user) may not create temporary tables in database \(database), where each batch is staged: GRANT TEMPORARY ON DATABASE \(quote(database)) TO \(quote(user))"))
        }
        guard let schemaOID = row[8] else {
            out.schemaMissing = true
            if !createTables {
                out.problems.append(SchemaProblem(key: "schema", message: "schema \(tables.schema) does not exist in database \(database) (create_tables is false)"))
            } else if !yes(7) {
                out.problems.append(SchemaProblem(key: "schema", message: "schema \(tables.schema) does not exist in database \(database) and user \(user) may not create it"))
            }
            out.missing = TableRole.allCases
            return out
        }
        let schemaRights = try c.query("SELECT has_schema_privilege(\(schemaOID)::oid, 'USAGE'), has_schema_privilege(\(schemaOID)::oid, 'CREATE')", timeout: timeout)
        let usage = schemaRights.rows.first?[0] == "t", create = schemaRights.rows.first?[1] == "t"
        if !usage {
            out.problems.append(SchemaProblem(key: "schema", message: "user \(user) may not use schema \(tables.schema) (GRANT USAGE ON SCHEMA \(quote(tables.schema)) TO \(quote(user)))"))
            return out
        }
        for role in TableRole.allCases {
            let table = try c.query("SELECT c.oid, c.relkind FROM pg_class c WHERE c.relnamespace = \(schemaOID)::oid AND c.relname = $1",
                                    [tables.name(role)], timeout: timeout)
            guard let found = table.rows.first, let oid = found[0] else {
                out.missing.append(role)
                if !createTables {
                    out.problems.append(SchemaProblem(key: role.option, message: "table \(tables.shown(role)) does not exist (create_tables is false: create it as the README shows)"))
                } else if !create {
                    out.problems.append(SchemaProblem(key: role.option, message: "table \(tables.shown(role)) does not exist and user \(user) may not create tables in schema \(tables.schema)"))
                }
                continue
            }
            out.problems += try inspectTable(c, role, oid: oid, kind: found[1] ?? "", tables: tables, user: user, timeout: timeout)
        }
        return out
    }

    private static func inspectTable(_ c: PostgresConnection, _ role: TableRole, oid: String, kind: String, tables: PostgresTables,
                                     user: String, timeout: Duration) throws(PostgresError) -> [SchemaProblem] {
        let shown = tables.shown(role)
        guard kind == "r" || kind == "p" else {
            let what = ["v": "a view", "m": "a materialized view", "f": "a foreign table", "S": "a sequence", "i": "an index"][kind] ?? "not a table"
            return [SchemaProblem(key: role.option, message: "\(shown) is \(what), not a table")]
        }
        var problems: [String] = []
        let rows = try c.query("""
            SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef OR attidentity <> '' OR attgenerated <> ''
            FROM pg_attribute WHERE attrelid = \(oid)::oid AND attnum > 0 AND NOT attisdropped ORDER BY attnum
            """, timeout: timeout).rows
        var found: [String: String] = [:]
        for r in rows { if let name = r[0] { found[name] = r[1] ?? "" } }
        let wanted = columns(role)
        for column in wanted {
            guard let type = found[column.name] else {
                problems.append("column \(column.name) (\(column.expected)) is missing")
                continue
            }
            if !column.accepts(type) { problems.append("column \(column.name) is \(type), expected \(column.expected)") }
        }
        let names = Set(wanted.map(\.name))
        for r in rows {
            guard let name = r[0], !names.contains(name), r[2] == "t", r[3] != "t" else { continue }
            problems.append("column \(name) is NOT NULL without a default, and the sink does not fill it: every row would be refused")
        }
        let conflict = role.conflictColumn
        if found[conflict] != nil {
            let unique = try c.query("""
                SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                               WHERE i.indrelid = \(oid)::oid AND i.indisunique AND i.indnkeyatts = 1
                                 AND i.indpred IS NULL AND i.indexprs IS NULL AND a.attname = $1)
                """, [conflict], timeout: timeout)
            if unique.rows.first?[0] != "t" {
                problems.append("no primary key or unique index on \(conflict), which ON CONFLICT (\(conflict)) needs\(role == .latest ? "" : ": a re-sent position would become a second row")")
            }
        }
        let rights = try c.query("SELECT " + role.privileges.map { "has_table_privilege(\(oid)::oid, '\($0)')" }.joined(separator: ", "), timeout: timeout)
        let missing = zip(role.privileges, rights.rows.first ?? []).filter { $0.1 != "t" }.map(\.0)
        if !missing.isEmpty {
            problems.append("user \(user) may not \(missing.joined(separator: ", ")) (GRANT \(missing.joined(separator: ", ")) ON \(tables.qualified(role)) TO \(quote(user)))")
        }
        guard !problems.isEmpty else { return [] }
        return [SchemaProblem(key: role.option, message: "table \(shown): \(problems.joined(separator: "; "))")]
    }
}
