import Foundation
import GatewayCore
import GatewayTesting
import DeliveryEngine
@testable import PostgresOutput
import Testing

/// Bad input at `locgate validate` (checkEnvironment) and at start: each problem is an error at its
/// JSON path when the database can be reached, a warning when it cannot, and the queue is untouched.
@Suite(.serialized) struct EnvironmentTests {
    static func findings(_ json: String) throws -> [String] {
        let configuration = try PluginOptions.valid(PostgresSinkPlugin.self, json)
        return PostgresSinkPlugin.checkEnvironment(configuration, context: EnvironmentContext(path: "sinks.db", peerTimeout: .seconds(5)))
            .map { "\($0.severity) \($0.path): \($0.message)" }
    }

    /// Runs the sink on a queue already holding `queued` positions and returns the error it stopped
    /// with (nil when it did not), after checking that the queue still holds every one of them.
    static func start(_ json: String, queue: String, queued: Int = 20) async throws -> String? {
        let outbox = try SQLiteOutbox(path: queue, maxRecords: 1000, synchronousFull: true)
        let entries = positions(0..<queued, devices: 5).map { p -> OutboxEntry in
            var line: [UInt8] = []
            PostgresRows.appendPosition(p, bounds: .box, to: &line)
            return OutboxEntry(id: p.id, payload: line, time: p.time?.milliseconds)
        }
        _ = try outbox.append(entries, at: Timestamp(milliseconds: 1_714_557_600_000))
        outbox.close()
        let harness = try Harness(json, id: "db")
        var failure: String?
        do {
            try await harness.run()
        } catch {
            failure = "\(error)"
        }
        #expect(queueRows(queue) == queued, "the queue lost positions")
        #expect(queueRows(queue, "dead_letters") == 0)
        return failure
    }

    @Test(.timeLimit(.minutes(1)))
    func aWrongPasswordIsAnErrorAtTheURLAndStopsTheSinkAtStart() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = sinkJSON(server, database: "tracks", queue: dir + "/q.sqlite", extra: #""password": "not-the-password-1234""#)
        let found = try Self.findings(json)
        #expect(found.count == 2, "\(found)")
        #expect(found.contains { $0.hasPrefix("error sinks.db.url: PostgreSQL refused the connection: ") && $0.contains("password authentication failed for user \"locgate\"") && $0.contains("28P01") }, "\(found)")
        #expect(!found.joined().contains("not-the-password-1234"))
        let failure = try #require(try await Self.start(json, queue: dir + "/q.sqlite"))
        #expect(failure.hasPrefix("sinks.db.url: PostgreSQL refused the connection: "), "\(failure)")
        #expect(failure.contains("password authentication failed"), "\(failure)")
        #expect(!failure.contains("not-the-password-1234"))
    }

    @Test(.timeLimit(.minutes(1)))
    func aMissingDatabaseIsAnErrorAtTheURL() async throws {
        let server = try PostgresServer()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = sinkJSON(server, database: "nowhere", queue: dir + "/q.sqlite")
        let found = try Self.findings(json)
        #expect(found.contains { $0.hasPrefix("error sinks.db.url: PostgreSQL refused the connection: ") && $0.contains("database \"nowhere\" does not exist") }, "\(found)")
        let failure = try #require(try await Self.start(json, queue: dir + "/q.sqlite"))
        #expect(failure.contains("sinks.db.url: ") && failure.contains("database \"nowhere\" does not exist [SQLSTATE 3D000]"), "\(failure)")
    }

    @Test(.timeLimit(.minutes(1)))
    func aColumnOfTheWrongTypeIsAnErrorAtItsTable() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        try createTables(server, database: "tracks")
        try server.psql("ALTER TABLE positions ALTER COLUMN time TYPE text; ALTER TABLE positions DROP COLUMN hdop; ALTER TABLE latest DROP CONSTRAINT latest_pkey", database: "tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = sinkJSON(server, database: "tracks", queue: dir + "/q.sqlite")
        let found = try Self.findings(json)
        #expect(found.contains("error sinks.db.tables.positions: table public.positions: column time is text, expected timestamp with time zone; column hdop (double precision) is missing"), "\(found)")
        #expect(found.contains("error sinks.db.tables.latest: table public.latest: no primary key or unique index on device, which ON CONFLICT (device) needs"), "\(found)")
        let failure = try #require(try await Self.start(json, queue: dir + "/q.sqlite"))
        #expect(failure.contains("sinks.db.tables.positions: table public.positions: column time is text, expected timestamp with time zone"), "\(failure)")
        #expect(failure.contains("sinks.db.tables.latest: "), "\(failure)")
        #expect(try server.psql("SELECT count(*) FROM positions", database: "tracks") == "0")
    }

    @Test(.timeLimit(.minutes(1)))
    func aReadOnlyUserIsAnErrorAtEachTableItMayNotWrite() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        try createTables(server, database: "tracks")
        try server.psql("CREATE ROLE reader LOGIN PASSWORD 'reader-pw'; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", database: "tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = #"{ "url": "\#(server.url(database: "tracks", user: "reader", password: "reader-pw"))", "queue": { "path": "\#(dir)/q.sqlite" } }"#
        let found = try Self.findings(json)
        #expect(found.contains(#"error sinks.db.tables.positions: table public.positions: user reader may not INSERT (GRANT INSERT ON "public"."positions" TO "reader")"#), "\(found)")
        #expect(found.contains(#"error sinks.db.tables.latest: table public.latest: user reader may not INSERT, UPDATE (GRANT INSERT, UPDATE ON "public"."latest" TO "reader")"#), "\(found)")
        #expect(found.contains { $0.hasPrefix("error sinks.db.tables.events: ") }, "\(found)")
        let failure = try #require(try await Self.start(json, queue: dir + "/q.sqlite"))
        #expect(failure.contains("sinks.db.tables.positions: table public.positions: user reader may not INSERT"), "\(failure)")
    }

    @Test(.timeLimit(.minutes(1)))
    func aUserWhoseTransactionsAreReadOnlyIsAnErrorAtTheURL() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        try createTables(server, database: "tracks")
        try server.psql("CREATE ROLE viewer LOGIN PASSWORD 'viewer-pw'; ALTER ROLE viewer SET default_transaction_read_only = on; GRANT ALL ON ALL TABLES IN SCHEMA public TO viewer", database: "tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = #"{ "url": "\#(server.url(database: "tracks", user: "viewer", password: "viewer-pw"))", "queue": { "path": "\#(dir)/q.sqlite" } }"#
        let found = try Self.findings(json).filter { !$0.hasPrefix("info ") }
        #expect(found == ["error sinks.db.url: database tracks accepts no writes (transaction_read_only is on: a standby, or default_transaction_read_only set for user viewer or the database)"], "\(found)")
        let failure = try #require(try await Self.start(json, queue: dir + "/q.sqlite"))
        #expect(failure.contains("sinks.db.url: database tracks accepts no writes"), "\(failure)")
    }

    @Test(.timeLimit(.minutes(1)))
    func missingTablesAreErrorsWhenTheSinkMayNotCreateThem() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let json = #"{ "url": "\#(server.url(database: "tracks"))", "create_tables": false, "queue": null }"#
        let found = try Self.findings(json)
        #expect(found == ["positions", "latest", "events"].map { "error sinks.db.tables.\($0): table public.\($0) does not exist (create_tables is false: create it as the README shows)" }, "\(found)")
        // With create_tables they are only announced.
        let created = try Self.findings(#"{ "url": "\#(server.url(database: "tracks"))", "queue": null }"#)
        #expect(created == ["positions", "latest", "events"].map { "info sinks.db.tables.\($0): table public.\($0) does not exist yet; the sink creates it at start" }, "\(created)")
    }

    @Test(.timeLimit(.minutes(1)))
    func postgisMissingIsAnErrorForAUserWhoCannotEnableIt() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks", postgis: false)
        try server.psql("CREATE ROLE writer LOGIN PASSWORD 'writer-pw'; GRANT CREATE ON SCHEMA public TO writer", database: "tracks")
        let json = #"{ "url": "\#(server.url(database: "tracks", user: "writer", password: "writer-pw"))", "queue": null }"#
        let found = try Self.findings(json)
        #expect(found.first == "error sinks.db.url: PostGIS is not enabled in database tracks and user writer may not enable it: run CREATE EXTENSION postgis; as a superuser", "\(found)")
    }

    @Test(.timeLimit(.minutes(1)))
    func aServerThatDoesNotAnswerIsAWarningAndTheSinkWaitsForIt() async throws {
        let port = LoopbackTCPServer.freePort()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = #"{ "url": "postgresql://locgate@127.0.0.1:\#(port)/tracks", "connect_timeout": "1s", "retry": { "initial": "50ms", "max": "200ms" }, "queue": { "path": "\#(dir)/q.sqlite" } }"#
        let found = try Self.findings(json)
        #expect(found.count == 2, "\(found)")
        #expect(found.contains { $0.hasPrefix("warning sinks.db.url: PostgreSQL is not reachable now: ") && $0.contains("Connection refused") && $0.hasSuffix("; positions wait in the queue until it is") }, "\(found)")
        // The sink starts, keeps what it receives and retries.
        let harness = try Harness(json, id: "db")
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await harness.sink.run(input: harness.buffer) }
            await harness.buffer.send(positions(0..<10, devices: 5))
            #expect(await Poll.until { queueRows(dir + "/q.sqlite") == 10 })
            #expect(await Poll.until { harness.stats.value("postgres.retried") >= 3 })
            group.cancelAll()
        }
        #expect(harness.log.entries(level: .warning, containing: "PostgreSQL does not answer; positions wait in the queue").count == 1, "\(harness.logText)")
        #expect(harness.log.entries(level: .warning, containing: "cannot connect to PostgreSQL: connection to server at \"127.0.0.1\", port \(port) failed: Connection refused").count >= 1, "\(harness.logText)")
        #expect(queueRows(dir + "/q.sqlite") == 10)
    }
}
