import Foundation
import GatewayCore
import GatewayTesting
@testable import PostgresOutput
import Testing

/// The postgres sink's delete of what PostgreSQL committed, on a queue disk that filled meanwhile:
/// the sink does not fail, says so at once (once, not at every retry), retries the delete until
/// there is space and ends with everything stored once and the queue empty.
@Suite(.serialized, .enabled(if: Tmpfs.canMount, "needs root to mount a small tmpfs"), .timeLimit(.minutes(2)))
struct DiskFullTests {
    @Test func theDeleteAfterACommitWaitsForSpace() async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let disk = dir + "/disk"
        #expect(Tmpfs.mount(disk, kilobytes: 2048))
        defer { Tmpfs.unmount(disk) }
        let harness = try Harness(#"{ "type": "postgres", "url": "\#(server.url(database: "tracks"))", "batch": { "max_positions": 100, "interval": "1h" }, "retry": { "initial": "50ms", "max": "500ms" }, "queue": { "path": "\#(disk)/q.sqlite" } }"#, id: "db")
        let stored: @Sendable () -> Int = { Int((try? server.psql("SELECT count(*) FROM positions", database: "tracks")) ?? "") ?? -1 }
        let sink = harness.sink, buffer = harness.buffer, stats = harness.stats
        let running = Task { try await sink.run(input: buffer) }
        defer { running.cancel() }
        await buffer.send(positions(0..<50, devices: 5))
        #expect(await Poll.until { stats.value("queue.depth") == 50 })
        Tmpfs.sh("dd if=/dev/zero of='\(disk)/fill' bs=4k 2>/dev/null")
        // The end of the input flushes the partial batch: PostgreSQL commits it, the delete finds the disk full.
        buffer.close()
        #expect(await Poll.until { stored() == 50 }, "\(harness.logText)")
        #expect(await Poll.until { stats.value("queue.disk_full") == 1 }, "\(harness.logText)")
        #expect(await Poll.until { stats.value("queue.write_failures") >= 3 }, "retried")
        let lines = harness.log.entries(level: .error, containing: "full")
        #expect(lines.count == 1 && lines[0].message.contains("delete"), "\(harness.logText)")
        #expect(stats.value("queue.depth") == 50)
        try FileManager.default.removeItem(atPath: disk + "/fill")
        try await running.value
        #expect(stats.value("queue.depth") == 0)
        #expect(stats.value("queue.disk_full") == 0)
        #expect(try server.psql("SELECT count(*), count(DISTINCT id) FROM positions", database: "tracks") == "50|50")
    }
}
