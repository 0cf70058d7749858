import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// `kill -9` of the real binary in the middle of an upload, then a restart on the same queue.
@Suite(.timeLimit(.minutes(5))) struct CrashTests {


    static func writeConfig(_ path: String, log: String, url: String, queue: String) throws {
        let json = """
            { "settings": { "shutdown_timeout": "120s", "stats_interval": "1s" },
              "sources": { "rx": { "type": "file", "path": "\(log)" } },
              "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "\(url)",
                                 "batch": { "max_positions": 500, "interval": "1s" },
                                 "retry": { "initial": "50ms", "max": "500ms" },
                                 "queue": { "path": "\(queue)" } } } }
            """
        try json.write(toFile: path, atomically: true, encoding: .utf8)
    }


    @Test func killNineMidUploadThenRestartDeliversEveryPositionInOrder() async throws {
        let binary = try LocgateBinary.path()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let epochs = 20_000
        try NMEASamples.writeLog(epochs: epochs, to: dir + "/long.nmea")
        #expect(FileManager.default.createFile(atPath: dir + "/empty.nmea", contents: Data()))
        let expected = (0..<epochs).map { 1_714_521_600_000 + $0 * 1000 }

        // Run 1: a slow receiver; kill -9 once the whole log is queued and a few batches arrived.
        // 0.2 s per request: 40 batches take at least 8 s, so the kill lands mid-upload even when
        // the machine is busy and the check below is slow to notice the log is queued.
        let first = try Receiver(directory: dir, arguments: ["--delay", "0.2"], name: "run1.jsonl")
        try CrashTests.writeConfig(dir + "/run1.json", log: dir + "/long.nmea", url: first.url, queue: dir + "/queue.sqlite")
        let run1 = try LocgateBinary.launch([binary, "run", dir + "/run1.json"], stderr: dir + "/run1.log")
        let queued = await Poll.until(timeout: .seconds(120)) {
            let log = (try? String(contentsOfFile: dir + "/run1.log", encoding: .utf8)) ?? ""
            return log.contains("input ended") && first.accepted().count >= 3
        }
        kill(run1.processIdentifier, SIGKILL)
        run1.waitUntilExit()
        #expect(queued)
        #expect(run1.terminationReason == .uncaughtSignal)
        first.stop()
        let ids1 = first.accepted().flatMap(\.ids).compactMap(ordinal)
        #expect(ids1.count < epochs, "the kill came after everything was delivered; the test proves nothing")

        // Run 2: nothing new to read; the queue left by run 1 drains before the process exits.
        let second = try Receiver(directory: dir, name: "run2.jsonl")
        defer { second.stop() }
        try CrashTests.writeConfig(dir + "/run2.json", log: dir + "/empty.nmea", url: second.url, queue: dir + "/queue.sqlite")
        let run2 = try LocgateBinary.launch([binary, "run", dir + "/run2.json"], stderr: dir + "/run2.log")
        #expect(await Poll.until(timeout: .seconds(120)) { !run2.isRunning })
        #expect(run2.terminationStatus == 0)
        let ids2 = second.accepted().flatMap(\.ids).compactMap(ordinal)

        // Every id at least once; each run strictly in order; run 2 starts at or before where run 1 stopped (no gap).
        #expect(Set(ids1 + ids2) == Set(expected))
        #expect(ids1 == Array(expected.prefix(ids1.count)))
        #expect(zip(ids2, ids2.dropFirst()).allSatisfy { $0 < $1 })
        #expect(ids2.last == expected.last)
        if let firstOfRun2 = ids2.first, let lastOfRun1 = ids1.last {
            #expect(firstOfRun2 <= lastOfRun1 + 1000)
            // Duplicates are only positions run 1 sent but could not see acknowledged.
            #expect(ids1.count + ids2.count - epochs == max(0, (lastOfRun1 - firstOfRun2) / 1000 + 1))
        }
    }
}
