import Foundation
import GatewayCore
import GatewayTesting
@testable import PostgresOutput
import Testing

@Suite struct ConfigurationTests {
    static func problems(_ json: String) throws -> [String] {
        try PluginOptions.read(PostgresSinkPlugin.self, json, path: "sinks.db").problems.map { "\($0.path): \($0.message)" }
    }

    @Test func theDefaultsAreTheDocumentedOnes() throws {
        let c = try PluginOptions.valid(PostgresSinkPlugin.self, #"{ "queue": null }"#)
        #expect(c.url == nil && c.password == nil && c.sslMode == nil && c.sslRootCert == nil)
        #expect(c.connectTimeout == .seconds(10) && c.statementTimeout == .seconds(30))
        #expect(c.tables == PostgresTables() && c.tables.schema == "public" && c.createTables)
        #expect(c.maxPositions == 1000 && c.interval == .seconds(1))
        #expect(c.retryInitial == .milliseconds(500) && c.retryMax == .seconds(30))
    }

    @Test(arguments: [
        (#"{ "url": "", "queue": null }"#, "sinks.db.url: must not be empty (leave url out to use libpq's PG* environment variables)"),
        (#"{ "url": "postgresql://h/db?nosuchoption=1", "queue": null }"#, "sinks.db.url: not a libpq connection string"),
        (#"{ "url": "host=h port", "queue": null }"#, "sinks.db.url: not a libpq connection string"),
        (#"{ "sslmode": "always", "queue": null }"#, #"sinks.db.sslmode: expected one of "disable", "allow", "prefer", "require", "verify-ca", "verify-full", got "always""#),
        (#"{ "tables": { "positions": "a", "latest": "a" }, "queue": null }"#, "sinks.db.tables: the three tables need three names, got a, a, events"),
        (#"{ "schema": "", "queue": null }"#, "sinks.db.schema: must not be empty"),
        (#"{ "tables": { "events": "\#(String(repeating: "e", count: 64))" }, "queue": null }"#, "sinks.db.tables.events: PostgreSQL names are at most 63 bytes, got 64"),
        (#"{ "batch": { "max_positions": 0 }, "queue": null }"#, "sinks.db.batch.max_positions: must be between 1 and 100000, got 0"),
        (#"{ "retry": { "initial": "5s", "max": "1s" }, "queue": null }"#, "sinks.db.retry.max: must be at least retry.initial (5s)"),
        (#"{ "url": "postgresql://h/db" }"#, "sinks.db.queue: required option is missing"),
    ])
    func badOptionsAreReportedAtTheirPath(json: String, expected: String) throws {
        let found = try Self.problems(json)
        #expect(found.contains { $0.hasPrefix(expected) }, "\(found)")
    }

    @Test func aPasswordInTheURLOrTheOptionNeverReachesALog() throws {
        _ = try PluginOptions.valid(PostgresSinkPlugin.self, #"{ "url": "postgresql://u:url-secret-9@h/db", "queue": null }"#)
        _ = try PluginOptions.valid(PostgresSinkPlugin.self, #"{ "url": "host=h password=kv-secret-8 dbname=db", "queue": null }"#)
        _ = try PluginOptions.valid(PostgresSinkPlugin.self, #"{ "password": "${secret:DB_PW}", "queue": null }"#, environment: ["DB_PW": "env-secret-7"])
        let text = Redaction.redact("url-secret-9 kv-secret-8 env-secret-7")
        #expect(!text.contains("secret-"), "\(text)")
    }

    @Test func explicitOptionsOverrideTheConnectionStringAndTheSinkNamesItself() throws {
        let c = try PluginOptions.valid(PostgresSinkPlugin.self, #"{ "url": "postgresql://u@h/db?sslmode=disable", "sslmode": "verify-full", "password": "pw-1234", "queue": null }"#)
        let p = c.connectionParameters(applicationName: "locgate sinks.db", connectTimeout: .milliseconds(1500))
        let names = p.map(\.0)
        // Pairs after dbname win over the string's; before it, the string wins.
        #expect(names.firstIndex(of: "application_name")! < names.firstIndex(of: "dbname")!)
        #expect(names.firstIndex(of: "dbname")! < names.firstIndex(of: "sslmode")!)
        #expect(p.contains { $0 == ("sslmode", "verify-full") } && p.contains { $0 == ("password", "pw-1234") } && p.contains { $0 == ("connect_timeout", "2") })
    }
}

@Suite struct RowTests {
    @Test func aPositionLineHasEveryColumnOfItsTableInOrder() {
        var p = positions(0..<1, devices: 1)[0]
        p.attributes = ["b": "2", "a": "x\ty"]
        var line: [UInt8] = []
        PostgresRows.appendPosition(p, bounds: .box, to: &line)
        let fields = String(decoding: line.dropLast(), as: UTF8.self).split(separator: "\t", omittingEmptySubsequences: false)
        #expect(fields.count == PostgresSchema.columns(.positions).count)
        #expect(fields[0] == "t-0" && fields[1] == "dev0" && fields[3] == "2024-05-01T10:00:00.000Z")
        // Hex EWKB: little-endian PointZ with SRID 4326, then x, y, z.
        var ewkb = "01" + "010000A0" + "E6100000"
        for v in [121.5, 31.2, 12.5] { ewkb += String(format: "%016llX", v.bitPattern.byteSwapped) }
        #expect(fields[4] == Substring(ewkb))
        #expect(fields.last == #"{"a":"x\\ty","b":"2"}"#)
        #expect(line.last == UInt8(ascii: "\n"))
    }

    @Test func anEventLineHasEveryColumnOfTheEventsTable() {
        var p = positions(0..<1, devices: 1)[0]
        p.id = "t-0-exit-north gate"
        let event = PositionEvent(kind: .exit, fenceId: "north gate")
        var line: [UInt8] = []
        PostgresRows.appendEvent(p, event, bounds: .box, to: &line)
        let fields = String(decoding: line.dropLast(), as: UTF8.self).split(separator: "\t", omittingEmptySubsequences: false)
        #expect(fields.count == PostgresSchema.columns(.events).count)
        #expect(Array(fields.prefix(9)) == ["t-0-exit-north gate", "t-0", "dev0", "rx", "2024-05-01T10:00:00.000Z", "exit", "north gate", #"\N"#, #"\N"#])
    }

    @Test func theNewestFixPerDeviceIsChosenByTimeAndNeedsACoordinate() {
        var batch = positions(0..<6, devices: 2)
        batch[5].latitude = nil
        batch.append(Position(time: Timestamp(milliseconds: 1_714_557_600_000 + 2000), latitude: 1, longitude: 2, source: "rx", device: "dev0", id: "late-copy"))
        let lines = batch.map { p -> (id: String, line: [UInt8]) in
            var line: [UInt8] = []
            PostgresRows.appendPosition(p, bounds: .box, to: &line)
            return (p.id, line)
        }
        // dev0: t-4 is newest; dev1: t-5 has no coordinates, so t-3.
        #expect(Set(PostgresRows.newestPerDevice(lines)) == ["t-4", "t-3"])
    }

    @Test func anArrayLiteralEscapesQuotesAndBackslashes() {
        #expect(PostgresSchema.arrayLiteral(["a", #"b"c"#, #"d\e"#, "f,g"]) == #"{"a","b\"c","d\\e","f,g"}"#)
    }
}

@Suite struct FailureTests {
    @Test(arguments: [
        ("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  28P01: password authentication failed for user \"x\"\nLOCATION:  auth_failed, auth.c:326\n",
         true, PostgresError.Kind.refused, "28P01", "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password authentication failed for user \"x\""),
        ("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  3D000: database \"n\" does not exist\n", true, .refused, "3D000", nil),
        ("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  57P03: the database system is starting up\n", true, .unavailable, "57P03", nil),
        ("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  53300: sorry, too many clients already\n", true, .unavailable, "53300", nil),
        ("connection to server at \"127.0.0.1\", port 5432 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?\n", false, .unreachable, nil,
         "connection to server at \"127.0.0.1\", port 5432 failed: Connection refused; Is the server running on that host and accepting TCP/IP connections?"),
        ("connection to server at \"127.0.0.1\", port 5432 failed: server does not support SSL, but SSL was required\n", true, .refused, nil, nil),
        ("connection to server at \"10.1.1.1\", port 5432 failed: timeout expired\n", false, .unreachable, nil, nil),
    ] as [(String, Bool, PostgresError.Kind, String?, String?)])
    func aFailedConnectionIsSortedByWhatTheServerSaid(text: String, reached: Bool, kind: PostgresError.Kind, state: String?, message: String?) {
        let e = PostgresConnection.connectionError(text, reachedServer: reached)
        #expect(e.kind == kind)
        #expect(e.sqlState == state)
        if let message { #expect(e.message == message) }
    }

    @Test(arguments: [
        ("23514", PostgresSink.Failure.row), ("23505", .row), ("22P02", .row), ("54000", .row), ("P0001", .row),
        ("42P01", .schema), ("42501", .schema), ("25006", .schema),
        ("40P01", .transient), ("57014", .transient), ("53100", .transient), ("XX000", .transient),
    ])
    func aRefusedStatementIsSortedBySQLState(state: String, expected: PostgresSink.Failure) {
        #expect(PostgresSink.classify(PostgresError(.statement, sqlState: state, message: "m")) == expected)
        #expect(PostgresSink.classify(PostgresError(.lost, sqlState: state, message: "m")) == .connection)
    }
}
