import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import HTTPOutput
import DeliveryEngine
import Testing

/// The http sink's own writes to its queue (the in-flight mark, the delete after a 2xx, a move to
/// the dead letters) on a disk that fills while it delivers: nothing is lost, the sink does not
/// fail, the error is logged at once (and not at every retry), the write is retried until there is
/// space again, and delivery goes on. (Commits of arriving positions: DeliveryTests/DiskFullTests.)
@Suite(.serialized, .enabled(if: Tmpfs.canMount, "needs root to mount a small tmpfs"), .timeLimit(.minutes(2)))
struct DiskFullTests {
    /// A sink whose queue is on a 2 MiB tmpfs, delivering to a receiver whose files are outside it.
    final class Rig: Sendable {
        let dir: String
        let disk: String
        /// The receiver answers a held request once this file exists.
        let release: String
        let receiver: Receiver
        let log = RecordingLogHandler(minimumLevel: .info)
        let stats = ComponentStats(id: "up")
        let outbox: any Outbox
        let buffer: SinkBuffer
        let running: Task<Void, any Error>

        init(rules: (_ release: String) -> String) async throws {
            dir = try makeTemporaryDirectory()
            disk = dir + "/disk"
            release = dir + "/release"
            #expect(Tmpfs.mount(disk, kilobytes: 2048))
            receiver = try Receiver(directory: dir)
            try await receiver.control(#"{"rules":[\#(rules(release))]}"#)
            let config = try configuration(#"{"url":"\#(receiver.url)","batch":{"max_positions":100,"interval":"1h"},"retry":{"initial":"20ms","max":"200ms"},"queue":{"path":"\#(disk)/q.sqlite"}}"#)
            let context = ComponentContext(id: "up", kind: .sink, logger: log.logger(label: "sinks.up"), stats: stats)
            outbox = try OutboxOptions.open(config.queue, context: context)
            buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: true, stats: stats)
            let sink = HTTPSink(configuration: config, context: context, outbox: outbox)
            let buffer = self.buffer
            running = Task { try await sink.run(input: buffer) }
        }

        /// Fills the disk to the last block.
        func fill() { Tmpfs.sh("dd if=/dev/zero of='\(disk)/fill' bs=4k 2>/dev/null") }
        func free() throws { try FileManager.default.removeItem(atPath: disk + "/fill") }
        func letTheServerAnswer() { _ = FileManager.default.createFile(atPath: release, contents: nil) }

        /// The disk is reported full, logged once at error level, and the write retried since.
        func expectHeldOnAFullDisk(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) async {
            #expect(await Poll.until { self.stats.value("queue.disk_full") == 1 }, sourceLocation: sourceLocation)
            #expect(await Poll.until { self.stats.value("queue.write_failures") >= 3 }, "retried", sourceLocation: sourceLocation)
            let lines = log.entries(level: .error, containing: "full")
            #expect(lines.count == 1, "logged once, not at every retry: \(log.entries)", sourceLocation: sourceLocation)
            #expect(lines.first?.message.contains(what) == true, "\(lines)", sourceLocation: sourceLocation)
        }

        func finish() async throws {
            buffer.close()
            try await running.value
        }

        deinit {
            running.cancel()
            _ = FileManager.default.createFile(atPath: release, contents: nil)
            receiver.stop()
            Tmpfs.unmount(disk)
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    @Test func theDeleteAfterA2xxWaitsForSpaceAndTheBatchIsNotSentAgain() async throws {
        let rig = try await Rig { #"{"hold":"\#($0)"}"# }
        await rig.buffer.send(positions(0..<100))
        // The request is out (its in-flight mark written); the disk fills before the 2xx comes.
        #expect(await Poll.until { rig.outbox.inFlightThrough != nil })
        rig.fill()
        rig.letTheServerAnswer()
        #expect(await Poll.until { rig.receiver.accepted().count == 1 })
        await rig.expectHeldOnAFullDisk("delete")
        #expect(rig.outbox.depth == 100)
        try rig.free()
        // Stops here when the sink failed: nothing would read the positions sent next.
        try #require(await Poll.until { rig.outbox.depth == 0 })
        #expect(await Poll.until { rig.stats.value("queue.disk_full") == 0 })
        await rig.buffer.send(positions(100..<150))
        try await rig.finish()
        #expect(rig.receiver.accepted().flatMap(\.ids) == positions(0..<150).map(\.id))
        #expect(rig.stats.value("http.sent") == 150)
    }

    @Test func theInFlightMarkWaitsForSpaceBeforeTheRequestGoes() async throws {
        let rig = try await Rig { _ in "" }
        await rig.buffer.send(positions(0..<50))
        #expect(await Poll.until { rig.outbox.depth == 50 })
        rig.fill()
        // The end of the input flushes the partial batch: its in-flight mark hits the full disk.
        rig.buffer.close()
        await rig.expectHeldOnAFullDisk("mark")
        // Not sent without the mark: a restart must send the same batch with the same key.
        #expect(rig.receiver.requests().isEmpty)
        try rig.free()
        try await rig.running.value
        #expect(rig.receiver.accepted().flatMap(\.ids) == positions(0..<50).map(\.id))
        #expect(rig.outbox.depth == 0)
        #expect(rig.stats.value("queue.disk_full") == 0)
    }

    @Test func aMoveToTheDeadLettersWaitsForSpaceAndDeliveryGoesOn() async throws {
        let rig = try await Rig { #"{"status":400,"hold":"\#($0)"}"# }
        await rig.buffer.send(positions(0..<100))
        #expect(await Poll.until { rig.outbox.inFlightThrough != nil })
        rig.fill()
        rig.letTheServerAnswer()
        await rig.expectHeldOnAFullDisk("dead letters")
        #expect(rig.outbox.depth == 100)
        #expect(rig.receiver.requests().count == 1)
        try rig.free()
        try #require(await Poll.until { rig.stats.value("queue.dead_lettered") == 100 })
        await rig.buffer.send(positions(100..<150))
        try await rig.finish()
        #expect(rig.receiver.accepted().flatMap(\.ids) == positions(100..<150).map(\.id))
        // The sink closed its queue on the way out: read the file again.
        let queue = try SQLiteOutbox(path: rig.disk + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
        #expect(try queue.deadLetterCount() == 100)
        #expect(queue.depth == 0)
    }
}
