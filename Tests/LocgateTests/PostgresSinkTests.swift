import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// The `postgres` sink through the binary: kill -9 at seeded moments during replays into
/// PostGIS, restarted each time, and `locgate validate` against a real server.
@Suite(.serialized)
struct PostgresSinkTests {
    static let devices = ["van-a", "van-b", "van-c"]

    static func pipeline(_ server: PostgresServer, log: String, extra: String = "") -> String {
        let sources = devices.enumerated().map { i, device in
            #""s\#(i)":{"type":"file","path":"\#(log)","device":"\#(device)","rate":"8000x","progress":false}"#
        }.joined(separator: ",")
        return """
        {"settings":{"shutdown_timeout":"2s","stats_interval":false},
         "sources":{\(sources)},
         "sinks":{"db":{"type":"postgres","inputs":["s0","s1","s2"],"url":"\(server.url(database: "tracks"))",
                        "batch":{"max_positions":500,"interval":"100ms"},"retry":{"initial":"100ms","max":"500ms"},
                        "queue":{"path":"db.sqlite"}\(extra)}}}
        """
    }

    /// Ids in the queue file's pending table.
    static func pending(_ queue: String) throws -> Set<String> {
        let out = try Program.run("/usr/bin/env", ["sqlite3", queue, "SELECT id FROM pending"]).stdout
        return Set(out.split(separator: "\n").map(String.init))
    }

    /// Ids in `positions` (none before the first run created the table).
    static func stored(_ server: PostgresServer) throws -> Set<String> {
        guard try server.psql("SELECT to_regclass('public.positions') IS NOT NULL", database: "tracks") == "t" else { return [] }
        return Set(try server.psql("SELECT id FROM positions", database: "tracks").split(separator: "\n").map(String.init))
    }

    @Test(.timeLimit(.minutes(3)))
    func killedAgainAndAgainDuringReplaysEveryCommittedPositionIsStoredOnceAndLatestHoldsTheNewestFix() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let epochs = 20_000
        try NMEASamples.writeLog(epochs: epochs, to: "\(dir)/drive.nmea")
        #expect(FileManager.default.createFile(atPath: "\(dir)/empty.nmea", contents: Data()))
        try Data(Self.pipeline(server, log: "drive.nmea").utf8).write(to: URL(fileURLWithPath: "\(dir)/replay.json"))
        try Data(Self.pipeline(server, log: "empty.nmea").utf8).write(to: URL(fileURLWithPath: "\(dir)/drain.json"))
        let binary = try LocgateBinary.path()

        // Each run replays the log from its start (so every run after the first re-sends stored
        // positions) and is killed at a seeded moment while it writes. The replay is paced at
        // 8000x (2.5 s for the log): the sink now stores 60,000 positions faster than the
        // shortest wait below, and a run that ended before its kill proved nothing.
        var rng = SeededGenerator(seed: 31)
        var storedAtKills: [Int] = []
        // Everything seen committed (stored, or queued) after any kill: none of it may ever go.
        var seenCommitted: Set<String> = []
        for run in 1...8 {
            let log = "\(dir)/run-\(run).log"
            let p = try LocgateBinary.launch([binary, "run", "\(dir)/replay.json"], stderr: log)
            defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
            let before = try Self.stored(server).count
            // Wait until this run has written something, then let it go on for a seeded while.
            #expect(await Poll.until(timeout: .seconds(60)) { (try? Self.stored(server).count).map { $0 > before || run > 1 } ?? false })
            try await Task.sleep(for: .milliseconds(Int.random(in: 200...1_500, using: &rng)))
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            #expect(p.terminationReason == .uncaughtSignal, "run \(run) ended on its own: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            let stored = try Self.stored(server)
            storedAtKills.append(stored.count)
            let queued = try Self.pending("\(dir)/db.sqlite")
            let gone = seenCommitted.subtracting(stored).subtracting(queued)
            #expect(gone.isEmpty, "after run \(run): \(gone.count) committed position(s) neither stored nor queued, e.g. \(gone.sorted().prefix(3))")
            seenCommitted.formUnion(stored)
            seenCommitted.formUnion(queued)
        }
        // The kills came in the middle of the replay, not after it.
        #expect(storedAtKills.first.map { $0 < Self.devices.count * epochs } ?? false, "\(storedAtKills)")

        // What the killed runs committed: rows stored, and rows still queued (some of those may be
        // stored too: a batch whose COMMIT returned just before the kill).
        let committed = try Self.stored(server).union(try Self.pending("\(dir)/db.sqlite"))
        let drain = try LocgateBinary.run(["run", "\(dir)/drain.json", "--drain", "60s"])
        #expect(drain.status == 0, "\(drain.stderr)")
        #expect(try Self.pending("\(dir)/db.sqlite").isEmpty)

        // Every committed position once, and nothing else.
        let counts = try server.psql("SELECT count(*), count(DISTINCT id) FROM positions", database: "tracks")
        #expect(counts == "\(committed.count)|\(committed.count)", "committed \(committed.count)")
        #expect(try Self.stored(server) == committed)
        #expect(seenCommitted.isSubset(of: committed))
        // The replay is in order and each fix is acknowledged only once committed: each device's
        // stored fixes are the first ones of the log, without a gap.
        let spans = try server.psql("SELECT device, count(*), (extract(epoch FROM max(time) - min(time)))::int + 1 FROM positions GROUP BY device ORDER BY device", database: "tracks")
        for line in spans.split(separator: "\n") {
            let f = line.split(separator: "|")
            #expect(f.count == 3 && f[1] == f[2], "a gap in \(line)")
        }
        // latest holds the newest stored fix of each device that has one (a kill may come before
        // a device's first commit: the sources are read side by side at full speed).
        let newest = """
            SELECT p.device, l.id = p.id, l.time = p.time FROM
            (SELECT DISTINCT ON (device) device, id, time FROM positions ORDER BY device, time DESC) p
            LEFT JOIN latest l USING (device) ORDER BY p.device
            """
        let latest = try server.psql(newest, database: "tracks")
        #expect(!latest.isEmpty && latest.split(separator: "\n").allSatisfy { $0.hasSuffix("|t|t") }, "\(latest)")

        // One run to the end of the replay: every position of every device stored once, and
        // latest is each device's last fix.
        let full = try LocgateBinary.run(["run", "\(dir)/replay.json", "--drain", "120s"])
        #expect(full.status == 0, "\(full.stderr)")
        let total = Self.devices.count * epochs
        #expect(try server.psql("SELECT count(*), count(DISTINCT id) FROM positions", database: "tracks") == "\(total)|\(total)")
        #expect(seenCommitted.isSubset(of: try Self.stored(server)))
        #expect(try server.psql(newest, database: "tracks") == Self.devices.map { "\($0)|t|t" }.joined(separator: "\n"))
        let logs = (1...8).compactMap { try? String(contentsOfFile: "\(dir)/run-\($0).log", encoding: .utf8) }.joined()
        #expect(!logs.contains("dead letters"), "\(logs)")
    }

    @Test(.timeLimit(.minutes(1)))
    func validateReportsAWrongPasswordAndAWrongColumnAtTheirPathsAndRunRefusesToStart() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        try server.psql("CREATE TABLE positions (id text PRIMARY KEY, device text, time text)", database: "tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try NMEASamples.writeLog(epochs: 3, to: "\(dir)/drive.nmea")
        try Data(Self.pipeline(server, log: "drive.nmea", extra: #","password":"${secret:DB_PASSWORD}""#).utf8).write(to: URL(fileURLWithPath: "\(dir)/p.json"))

        let wrong = try LocgateBinary.run(["validate", "\(dir)/p.json"], environment: ["DB_PASSWORD": "wrong-secret-pw"])
        #expect(wrong.status == 2, "\(wrong.output)")
        #expect(wrong.stderr.contains("sinks.db.url: PostgreSQL refused the connection:") && wrong.stderr.contains("password authentication failed"), "\(wrong.output)")
        #expect(!wrong.output.contains("wrong-secret-pw"))

        let right = try LocgateBinary.run(["validate", "\(dir)/p.json"], environment: ["DB_PASSWORD": server.password])
        #expect(right.status == 2, "\(right.output)")
        #expect(right.stderr.contains("sinks.db.tables.positions: table public.positions: column source (text) is missing"), "\(right.output)")
        #expect(right.stderr.contains("column time is text, expected timestamp with time zone"), "\(right.output)")

        let run = try LocgateBinary.run(["run", "\(dir)/p.json"], environment: ["DB_PASSWORD": server.password])
        #expect(run.status == 1, "\(run.output)")
        #expect(run.stderr.contains("sinks.db.tables.positions: table public.positions: column source (text) is missing"), "\(run.output)")
        #expect(try server.psql("SELECT count(*) FROM positions", database: "tracks") == "0")
    }
}
