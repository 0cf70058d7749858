import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
import DeliveryEngine
@testable import PostgresOutput
import Synchronization
import Testing

@Suite(.serialized) struct DeliveryTests {
    @Test(.timeLimit(.minutes(1)))
    func everyPositionIsStoredOnceAndLatestHoldsEachDevicesNewestFix() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: dir + "/q.sqlite"), id: "db")
        try await harness.run { buffer in
            await buffer.send(positions(0..<500, devices: 5))
            // Re-sent (a device that did not hear its answer): the same ids again.
            await buffer.send(positions(100..<200, devices: 5))
            await buffer.send(positions(500..<1000, devices: 5))
        }
        #expect(try server.psql("SELECT count(*), count(DISTINCT id) FROM positions", database: "tracks") == "1000|1000", "\(harness.logText)")
        #expect(try server.psql("SELECT device, id FROM latest ORDER BY device", database: "tracks")
                == "dev0|t-995\ndev1|t-996\ndev2|t-997\ndev3|t-998\ndev4|t-999")
        #expect(harness.stats.value("postgres.duplicates") == 100)
        #expect(harness.stats.value("postgres.sent") == 1100)
        let row = try server.psql("SELECT ST_AsText(geom), datum, datum_x, datum_y, time, altitude, speed, track, hdop, eph, mode, status, satellites, attributes FROM positions WHERE id = 't-0'", database: "tracks")
        #expect(row == "POINT Z (121.5 31.2 12.5)|wgs84|121.5|31.2|2024-05-01 10:00:00+00|12.5|2.5|90|0.9|4.5|3|1|9|")
        #expect(queueRows(dir + "/q.sqlite") == 0)
        #expect(harness.logText.contains("created table public.positions"), "\(harness.logText)")
    }

    @Test(.timeLimit(.minutes(1)))
    func latestIsNeverMovedBackByAnOlderFix() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: nil), id: "db")
        try await harness.run { buffer in
            await buffer.send(positions(500..<510, devices: 5))
            // A backlog of older fixes arriving later (a gateway that was offline).
            await buffer.send(positions(0..<10, devices: 5))
        }
        #expect(try server.psql("SELECT string_agg(id, ',' ORDER BY device) FROM latest", database: "tracks") == "t-505,t-506,t-507,t-508,t-509")
        #expect(try server.psql("SELECT count(*) FROM positions", database: "tracks") == "20")
    }

    @Test(.timeLimit(.minutes(1)))
    func gcj02AndBD09PositionsKeepTheirCoordinatesAndGetTheirWGS84PointWithinACentimetre() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        var rng = SeededGenerator(seed: 31)
        var wgs: [String: GeoPoint] = [:]
        var given: [String: (Double, Double)] = [:]
        var sent: [Position] = []
        for i in 0..<300 {
            // Across China: Kashgar to Harbin, Hainan to Inner Mongolia.
            let w = GeoPoint(latitude: Double.random(in: 18.5...48.5, using: &rng), longitude: Double.random(in: 76...128, using: &rng))
            let datum: ChinaDatums.Datum = i % 2 == 0 ? .gcj02 : .bd09
            let shifted = ChinaDatums.convert(w, from: .wgs84, to: datum)
            let id = "c-\(i)"
            wgs[id] = w
            given[id] = (shifted.longitude, shifted.latitude)
            sent.append(Position(time: Timestamp(milliseconds: 1_714_557_600_000 + Int64(i) * 1000), latitude: shifted.latitude,
                                 longitude: shifted.longitude, mode: .threeD, datum: datum == .gcj02 ? .gcj02 : .bd09,
                                 source: "rx", device: "d\(i % 3)", id: id))
        }
        // A projected position carries WGS84 latitude/longitude beside its easting and northing.
        sent.append(Position(time: Timestamp(milliseconds: 1_714_557_900_000), latitude: 31.2, longitude: 121.5, mode: .threeD,
                             datum: Datum(name: "EPSG:32651"), x: 357_225.5, y: 3_453_272.25, source: "rx", device: "p", id: "utm"))
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: nil), id: "db")
        let batch = sent
        try await harness.run { buffer in await buffer.send(batch) }
        let rows = try server.psql("SELECT id, datum, datum_x, datum_y, ST_X(geom), ST_Y(geom), ST_SRID(geom) FROM positions WHERE datum <> 'EPSG:32651'", database: "tracks")
        var worst = 0.0, checked = 0
        for line in rows.split(separator: "\n") {
            let f = line.split(separator: "|").map(String.init)
            guard f.count == 7, let w = wgs[f[0]], let g = given[f[0]], let x = Double(f[4]), let y = Double(f[5]) else { continue }
            // The coordinates as given, bit for bit, and the point converted back.
            #expect(Double(f[2]) == g.0 && Double(f[3]) == g.1, "\(line)")
            #expect(f[6] == "4326")
            worst = max(worst, metres(w.latitude, w.longitude, y, x))
            checked += 1
        }
        #expect(checked == 300)
        #expect(worst < 0.01, "worst round trip \(worst) m")
        #expect(try server.psql("SELECT datum, datum_x, datum_y, ST_X(geom), ST_Y(geom) FROM positions WHERE id = 'utm'", database: "tracks")
                == "EPSG:32651|357225.5|3453272.25|121.5|31.2")
    }

    @Test(.timeLimit(.minutes(1)))
    func eventsGoToTheEventsTableWithTheirPositionAndFence() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        var fix = positions(0..<1, devices: 1)[0]
        fix.attributes = ["fences": "park", "fence_names": "City Park"]
        var enter = fix
        enter.id = fix.id + "-enter-park"
        enter.event = PositionEvent(kind: .enter, fenceId: "park", fenceName: "City Park")
        var lost = Position(time: Timestamp(milliseconds: 1_714_557_700_000), latitude: 31.2, longitude: 121.5, mode: .noFix,
                            source: "rx", device: "dev0", id: "rx-fix_lost-1714557700000-dev0")
        lost.event = PositionEvent(kind: .fixLost)
        var antenna = Position(time: Timestamp(milliseconds: 1_714_557_800_000), source: "rx", device: "dev0", id: "rx-antenna-1714557800000-dev0")
        antenna.event = PositionEvent(kind: .antenna, status: "open")
        // A motion event: dated at its fix, its details in attributes.
        var trip = fix
        trip.id = fix.id + "-trip_end"
        trip.time = Timestamp(milliseconds: 1_714_557_900_000)
        trip.attributes = ["trip.distance_m": "1520.4", "trip.duration_s": "240"]
        trip.event = PositionEvent(kind: .tripEnd)
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: nil), id: "db")
        let batch = [fix, enter, lost, antenna, trip]
        try await harness.run { buffer in await buffer.send(batch) }
        #expect(try server.psql("SELECT id, attributes->>'fence_names' FROM positions", database: "tracks") == "t-0|City Park")
        let events = try server.psql("SELECT id, coalesce(position_id, '-'), type, coalesce(fence, '-'), coalesce(fence_name, '-'), coalesce(antenna, '-'), ST_AsText(geom) FROM events ORDER BY time", database: "tracks")
        #expect(events == """
            t-0-enter-park|t-0|enter|park|City Park|-|POINT Z (121.5 31.2 12.5)
            rx-fix_lost-1714557700000-dev0|-|fix_lost|-|-|-|POINT Z (121.5 31.2 0)
            rx-antenna-1714557800000-dev0|-|antenna|-|-|open|
            t-0-trip_end|t-0|trip_end|-|-|-|POINT Z (121.5 31.2 12.5)
            """)
        #expect(try server.psql("SELECT attributes->>'trip.distance_m' FROM events WHERE type = 'trip_end'", database: "tracks") == "1520.4")
        // An event is not a fix: latest keeps the position.
        #expect(try server.psql("SELECT id FROM latest", database: "tracks") == "t-0")
    }

    @Test(.timeLimit(.minutes(1)))
    func textIsStoredAsSentWhateverItHolds() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        var p = positions(0..<1, devices: 1)[0]
        p.device = "tab\there\nnew line \\ back\\slash \"quoted\" 'single' 北京 \u{1}"
        p.id = "id\twith\\odd\rbits"
        p.attributes = ["note": "a \"b\" \\ c\nd\u{0}e", "route": "北京 → 上海"]
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: nil), id: "db")
        let batch = [p]
        try await harness.run { buffer in await buffer.send(batch) }
        #expect(try server.psql("SELECT device = E'tab\\there\\nnew line \\\\ back\\\\slash \"quoted\" ''single'' 北京 \\x01', id = E'id\\twith\\\\odd\\rbits' FROM positions", database: "tracks") == "t|t")
        #expect(try server.psql("SELECT attributes->>'note' = E'a \"b\" \\\\ c\\nd\u{FFFD}e', attributes->>'route' FROM positions", database: "tracks") == "t|北京 → 上海")
        #expect(try server.psql("SELECT id = E'id\\twith\\\\odd\\rbits' FROM latest", database: "tracks") == "t")
    }

    @Test(.timeLimit(.minutes(1)))
    func aRowPostgresRefusesGoesToTheDeadLettersAndTheRestIsStored() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        try createTables(server, database: "tracks")
        try server.psql("ALTER TABLE positions ADD CONSTRAINT plausible_speed CHECK (speed < 100)", database: "tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var sent = positions(0..<1000, devices: 5)
        sent[137].speed = 250
        sent[731].speed = 300
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: dir + "/q.sqlite"), id: "db")
        let batch = sent
        try await harness.run { buffer in await buffer.send(batch) }
        #expect(try server.psql("SELECT count(*) FROM positions", database: "tracks") == "998")
        #expect(try server.psql("SELECT count(*) FROM positions WHERE id IN ('t-137', 't-731')", database: "tracks") == "0")
        #expect(queueRows(dir + "/q.sqlite") == 0)
        #expect(queueRows(dir + "/q.sqlite", "dead_letters") == 2)
        let answer = try Program.run("/usr/bin/env", ["sqlite3", dir + "/q.sqlite", "SELECT id || ' ' || answer FROM dead_letters ORDER BY seq"]).stdout
        #expect(answer.contains("t-137 new row for relation \"positions\" violates check constraint \"plausible_speed\""), "\(answer)")
        #expect(answer.contains("[SQLSTATE 23514]"), "\(answer)")
        #expect(harness.stats.value("queue.dead_lettered") == 2)
        #expect(harness.log.entries(level: .error, containing: "PostgreSQL refused position t-731").count == 1, "\(harness.logText)")
    }

    @Test(.timeLimit(.minutes(1)))
    func namedTablesInANewSchemaAreCreatedAndUsed() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks", postgis: false)
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: nil,
                                               extra: #""schema": "Fleet Data", "tables": { "positions": "fixes", "latest": "now", "events": "happenings" }"#), id: "db")
        try await harness.run { buffer in await buffer.send(positions(0..<10, devices: 5)) }
        #expect(try server.psql("SELECT count(*) FROM \"Fleet Data\".fixes", database: "tracks") == "10", "\(harness.logText)")
        #expect(try server.psql("SELECT count(*) FROM \"Fleet Data\".now", database: "tracks") == "5")
        #expect(try server.psql("SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'Fleet Data' AND tablename = 'fixes'", database: "tracks")
                == "fixes_device_time,fixes_geom,fixes_pkey")
        // PostGIS was enabled by the sink (its user is a superuser here).
        #expect(harness.logText.contains("created extension postgis"))
    }

    @Test(.timeLimit(.minutes(1)))
    func aMemoryQueueAcknowledgesABatchOnlyOncePostgresCommittedIt() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: nil), id: "db")
        let acknowledged = Atomic<Int>(0)
        try await harness.run { buffer in
            // Let the sink connect, then take the server away.
            #expect(await Poll.until { harness.stats.value("postgres.connects") == 1 })
            server.stop(immediate: true)
            let output = SourceOutput(tracking: { batch, ack in await buffer.send(batch, acknowledgement: ack) })
            await output.emit(positions(0..<50, devices: 5)) { acknowledged.add(1, ordering: .relaxed) }
            #expect(await Poll.until { harness.log.entries(level: .warning, containing: "lost the connection to PostgreSQL").count
                                         + harness.log.entries(level: .warning, containing: "cannot connect to PostgreSQL").count > 0 }, "\(harness.logText)")
            #expect(acknowledged.load(ordering: .relaxed) == 0)
            try server.start()
            #expect(await Poll.until { acknowledged.load(ordering: .relaxed) == 1 }, "\(harness.logText)")
        }
        #expect(try server.psql("SELECT count(*) FROM positions", database: "tracks") == "50")
    }
}
