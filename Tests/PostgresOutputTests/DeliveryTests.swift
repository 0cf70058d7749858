import Foundation
import GatewayCore
import GatewayTesting
import Outbox
@testable import PostgresOutput
import Testing

@Suite(.serialized) struct DeliveryTests {
    @Test(.timeLimit(.minutes(1)))
    func everyPositionIsStoredOnceAndLatestHoldsEachDevicesNewestFix() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let harness = try SinkHarness(sinkJSON(server, database: "tracks", queue: dir + "/q.sqlite"))
        try await harness.run { buffer in
            await buffer.send(positions(0..<500))
            // Re-sent (a device that did not hear its answer): the same ids again.
            await buffer.send(positions(100..<200))
            await buffer.send(positions(500..<1000))
        }
        #expect(try server.psql("SELECT count(*), count(DISTINCT id) FROM positions", database: "tracks") == "1000|1000", "\(harness.logText)")
        #expect(try server.psql("SELECT device, id FROM latest ORDER BY device", database: "tracks")
                == "dev0|t-995\ndev1|t-996\ndev2|t-997\ndev3|t-998\ndev4|t-999")
        #expect(harness.stats.value("postgres.duplicates") == 100)
        let row = try server.psql("SELECT ST_AsText(geom), datum, datum_x, datum_y, time, speed, satellites FROM positions WHERE id = 't-0'", database: "tracks")
        #expect(row == "POINT Z (121.5 31.2 12.5)|wgs84|121.5|31.2|2024-05-01 10:00:00+00|2.5|9")
    }
}
