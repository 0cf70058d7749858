import Foundation
import GatewayTesting
import MQTTTesting
import GatewayCore
import Testing

/// `kill -9` of the real binary in the middle of a replay into the mqtt sink, then a restart on the same queue.
@Suite(.serialized) struct CrashTests {


    static func writeConfig(_ path: String, log: String, rate: String, broker: MosquittoBroker, queue: String) throws {
        let json = """
            { "settings": { "shutdown_timeout": "60s", "stats_interval": "1s" },
              "sources": { "rx": { "type": "file", "path": "\(log)", "rate": "\(rate)", "device": "van-1" } },
              "sinks": { "up": { "type": "mqtt", "inputs": ["rx"], "url": "\(broker.url)", "username": "\(broker.user)",
                                 "password": "\(broker.password)", "client_id": "crash-test", "topic": "fleet/{device}",
                                 "status": { "topic": "fleet/gw/status" }, "reconnect_max": "1s", "queue": { "path": "\(queue)" } } } }
            """
        try json.write(toFile: path, atomically: true, encoding: .utf8)
    }


    /// The ids still queued in an outbox file (read with the sqlite3 tool, as an operator would).
    static func queuedIDs(_ queue: String) throws -> [String] {
        try Program.run("/usr/bin/sqlite3", [queue, "SELECT id FROM pending ORDER BY seq"]).stdout.split(separator: "\n").map(String.init)
    }

    @Test(.timeLimit(.minutes(3)))
    func killNineMidReplayThenRestartDeliversEveryCommittedIDAndTheWillSaysOffline() async throws {
        let binary = try LocgateBinary.path()
        let broker = try MosquittoBroker()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let epochs = 20_000
        try NMEASamples.writeLog(epochs: epochs, to: dir + "/long.nmea")
        #expect(FileManager.default.createFile(atPath: dir + "/empty.nmea", contents: Data()))
        let queue = dir + "/queue.sqlite"
        let subscriber = try await Subscriber(broker: broker, topic: "fleet/van-1", persistent: true)
        let status = try await Subscriber(broker: broker, topic: "fleet/gw/status")

        // Run 1: replayed at 1000x (1000 positions/s); killed once some have arrived, long before the end.
        try CrashTests.writeConfig(dir + "/run1.json", log: dir + "/long.nmea", rate: "1000x", broker: broker, queue: queue)
        let run1 = try LocgateBinary.launch([binary, "run", dir + "/run1.json"], stderr: dir + "/run1.log")
        #expect(await Poll.until(timeout: .seconds(60)) { status.messages().map(\.payload) == ["online"] })
        #expect(await Poll.until(timeout: .seconds(60)) { subscriber.messages().count >= 1000 })
        // The sink delivers faster than the replay commits, so its queue is empty most of the
        // time: freeze the broker, and what run 1 commits from then on waits for a PUBACK that
        // never comes; the kill then always finds committed positions never acknowledged.
        broker.pause()
        #expect(await Poll.until(timeout: .seconds(30)) { ((try? CrashTests.queuedIDs(queue)) ?? []).count >= 200 })
        kill(run1.processIdentifier, SIGKILL)
        run1.waitUntilExit()
        broker.resume()
        #expect(run1.terminationReason == .uncaughtSignal)
        // The broker publishes the will as soon as it sees the connection die.
        #expect(await Poll.until(timeout: .seconds(30)) { status.messages().map(\.payload) == ["online", "offline"] })

        // After the kill the queue file is what run 1 committed and never saw acknowledged.
        let seenAtKill = Set(subscriber.messages().compactMap { positionID($0.payload) })
        let queued = try CrashTests.queuedIDs(queue)
        #expect(!queued.isEmpty, "the kill came after everything was delivered; the test proves nothing")

        // Run 2: nothing new to read; the queue left by run 1 drains, then the process exits.
        try CrashTests.writeConfig(dir + "/run2.json", log: dir + "/empty.nmea", rate: "max", broker: broker, queue: queue)
        let run2 = try LocgateBinary.launch([binary, "run", dir + "/run2.json"], stderr: dir + "/run2.log")
        #expect(await Poll.until(timeout: .seconds(120)) { !run2.isRunning })
        #expect(run2.terminationStatus == 0)
        #expect(await Poll.until(timeout: .seconds(30)) { Set(subscriber.messages().compactMap { positionID($0.payload) }).isSuperset(of: queued) })
        let all = Set(subscriber.messages().compactMap { positionID($0.payload) })
        let missing = Set(queued).subtracting(all)
        #expect(missing.isEmpty, "\(missing.count) committed id(s) never arrived, e.g. \(missing.sorted().prefix(5))")
        // Everything committed arrived, and it is a prefix of the replay: nothing skipped in the middle.
        #expect(all.isSuperset(of: seenAtKill))
        #expect(all.count < epochs, "the kill came after the replay ended; the test proves nothing")
        #expect(all == Set((0..<all.count).map { "rx-\(1_714_521_600_000 + Int64($0) * 1000)" }))
        #expect(try CrashTests.queuedIDs(queue).isEmpty)
        #expect(await Poll.until(timeout: .seconds(30)) { status.messages().map(\.payload) == ["online", "offline", "online", "offline"] })
    }
}
