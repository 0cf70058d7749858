import Foundation
import GatewayCore
import GatewayTesting
import NATSClient
import NATSTesting
import Testing

/// `kill -9` of the real binary in the middle of a replay into the nats sink, then a restart on
/// the same outbox: the stream holds every committed position exactly once.
@Suite(.serialized) struct CrashTests {


    static func writeConfig(_ path: String, log: String, rate: String, servers: [String], queue: String) throws {
        let list = servers.map { "\"\($0)\"" }.joined(separator: ", ")
        let json = """
            { "settings": { "shutdown_timeout": "120s", "stats_interval": "1s" },
              "sources": { "rx": { "type": "file", "path": "\(log)", "rate": "\(rate)", "device": "van-1" } },
              "sinks": { "bus": { "type": "nats", "inputs": ["rx"], "servers": [\(list)],
                                  "subject": "locgate.positions.{device}", "expect_stream": "LOCGATE",
                                  "max_pending": 64, "queue": { "path": "\(queue)" } } } }
            """
        try json.write(toFile: path, atomically: true, encoding: .utf8)
    }


    @Test(.timeLimit(.minutes(4)))
    func killNineMidReplayThenRestartStoresEveryCommittedPositionOnce() async throws {
        let binary = try LocgateBinary.path()
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        try await cluster.createStream("LOCGATE", subjects: ["locgate.>"])
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let epochs = 20_000
        try NMEASamples.writeLog(epochs: epochs, to: dir + "/long.nmea")
        #expect(FileManager.default.createFile(atPath: dir + "/empty.nmea", contents: Data()))
        let expected = (0..<epochs).map { "rx-\(1_714_521_600_000 + $0 * 1000)" }

        // Run 1: replays as fast as it can, so a backlog waits in the outbox and a full window of
        // 64 is in flight (some stored, their PubAcks not yet processed) when kill -9 lands.
        try CrashTests.writeConfig(dir + "/run1.json", log: dir + "/long.nmea", rate: "max", servers: cluster.urls, queue: dir + "/outbox.sqlite")
        let run1 = try LocgateBinary.launch([binary, "run", dir + "/run1.json"], stderr: dir + "/run1.log")
        let midway = await Poll.until(timeout: .seconds(120), interval: .milliseconds(5)) {
            ((try? await cluster.count("LOCGATE")) ?? 0) >= 3000
        }
        kill(run1.processIdentifier, SIGKILL)
        run1.waitUntilExit()
        #expect(midway)
        #expect(run1.terminationReason == .uncaughtSignal)
        let afterKill = try await cluster.messages("LOCGATE")
        #expect(afterKill.count < epochs, "the kill came after the whole replay; the test proves nothing")

        // What run 1 committed: the queue holds the undelivered rest of it.
        // Run 2 reads nothing new; the outbox drains before the process exits.
        try CrashTests.writeConfig(dir + "/run2.json", log: dir + "/empty.nmea", rate: "max", servers: cluster.urls, queue: dir + "/outbox.sqlite")
        let run2 = try LocgateBinary.launch([binary, "run", dir + "/run2.json"], stderr: dir + "/run2.log")
        #expect(await Poll.until(timeout: .seconds(120)) { !run2.isRunning })
        #expect(run2.terminationStatus == 0)

        // The replay is in order and each fix is acknowledged upstream only once committed, so
        // what was committed is a prefix of the log: the stream holds that prefix, each id once.
        let stored = try await cluster.messages("LOCGATE")
        #expect(stored.count >= afterKill.count)
        #expect(Delivery(stored, expected: expected.prefix(stored.count)) == .exact)
        let run2Log = (try? String(contentsOfFile: dir + "/run2.log", encoding: .utf8)) ?? ""
        #expect(run2Log.contains("resuming with") || stored.count == afterKill.count)
    }
}
