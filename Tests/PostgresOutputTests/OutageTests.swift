import Foundation
import GatewayCore
import GatewayTesting
@testable import PostgresOutput
import Testing

/// PostgreSQL stopped with `pg_ctl stop -m immediate` in the middle of a run and started again.
@Suite(.serialized) struct OutageTests {
    @Test(.timeLimit(.minutes(2)))
    func postgresStoppedMidRunAndStartedAgainLosesNothingAndSaysSoWhileItIsDown() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: dir + "/q.sqlite"), id: "db")
        let stored: @Sendable () -> Int = { Int((try? server.psql("SELECT count(*) FROM positions", database: "tracks")) ?? "") ?? -1 }
        try await harness.run { buffer in
            for chunk in stride(from: 0, to: 3000, by: 100) { await buffer.send(positions(chunk..<chunk + 100, devices: 5)) }
            #expect(await Poll.until { stored() == 3000 }, "\(harness.logText)")
            server.stop(immediate: true)
            // While it is down: positions are committed to the queue and the log says what happens.
            for chunk in stride(from: 3000, to: 6000, by: 100) { await buffer.send(positions(chunk..<chunk + 100, devices: 5)) }
            #expect(await Poll.until { harness.log.entries(level: .warning).contains { $0.message.contains("PostgreSQL") && $0.message.contains("position(s) queued") } },
                    "\(harness.logText)")
            #expect(queueRows(dir + "/q.sqlite") == 3000)
            // Down for a few seconds (several backoff rounds), then back.
            #expect(await Poll.until(timeout: .seconds(30)) { harness.stats.value("postgres.retried") >= 5 })
            try server.start()
            #expect(await Poll.until(timeout: .seconds(30)) { stored() == 6000 }, "\(harness.logText)")
        }
        #expect(try server.psql("SELECT count(*), count(DISTINCT id), min(id), max(time) FROM positions", database: "tracks") == "6000|6000|t-0|2024-05-01 11:39:59+00")
        #expect(try server.psql("SELECT string_agg(id, ',' ORDER BY device) FROM latest", database: "tracks") == "t-5995,t-5996,t-5997,t-5998,t-5999")
        #expect(queueRows(dir + "/q.sqlite") == 0)
        #expect(harness.log.entries(level: .info, containing: "PostgreSQL takes batches again after").count == 1, "\(harness.logText)")
    }
}
