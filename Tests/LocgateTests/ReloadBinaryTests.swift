import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// `locgate run` reloading its file on SIGHUP, as systemd's `ExecReload` does it.
@Suite struct ReloadBinaryTests {
    @Test(.timeLimit(.minutes(1)))
    func sighupAppliesAValidFileKeepsRunningOnABrokenOneAndLosesNothing() async throws {
        let server = LoopbackTCPServer(interval: .milliseconds(5)) { n in Array(NMEASamples.epoch(n).utf8) }
        try server.start()
        defer { server.stop() }
        let dir = try makeTemporaryDirectory()
        let config = dir + "/pipeline.json"
        func write(_ text: String) throws { try Data(text.utf8).write(to: URL(fileURLWithPath: config)) }
        func pipeline(_ file: String) -> String {
            """
            { "settings": { "stats_interval": false },
              "sources": { "rx": { "type": "tcp", "host": "127.0.0.1", "port": \(server.port) } },
              "sinks": { "out": { "type": "file", "inputs": ["rx"], "path": "\(file)" } } }
            """
        }
        @Sendable func ids(_ file: String) -> [String] {
            let text = (try? String(contentsOfFile: dir + "/" + file, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONValue.parse(string: String($0))["id"]?.stringValue }
        }
        @Sendable func stderr() -> String { (try? String(contentsOfFile: dir + "/stderr.log", encoding: .utf8)) ?? "" }
        @Sendable func count(_ text: String) -> Int { stderr().components(separatedBy: text).count - 1 }

        try write(pipeline("a.jsonl"))
        let process = try LocgateBinary.launch([try LocgateBinary.path(), "run", config], stderr: dir + "/stderr.log")
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        #expect(await Poll.until { ids("a.jsonl").count >= 50 })

        // A syntax error: one problem, at the document.
        try write("{ \"sources\": ")
        kill(process.processIdentifier, SIGHUP)
        #expect(await Poll.until { count("reload rejected") == 1 })
        #expect(stderr().contains("error locgate: reload: \(config): $: not valid JSON"))

        // Two problems: each on its own error line with its JSON path.
        try write(pipeline("a.jsonl").replacingOccurrences(of: #""port": "#, with: #""colour": "red", "port": "#)
            .replacingOccurrences(of: #""inputs": ["rx"]"#, with: #""inputs": ["rx"], "mode": "sideways""#))
        kill(process.processIdentifier, SIGHUP)
        #expect(await Poll.until { count("reload rejected") == 2 })
        #expect(stderr().contains("error locgate: reload: \(config): sources.rx.colour: unknown option"))
        #expect(stderr().contains("error locgate: reload: \(config): sinks.out.mode: expected one of"))
        let before = ids("a.jsonl").count
        #expect(await Poll.until { ids("a.jsonl").count >= before + 50 }, "the old pipeline stopped writing after a rejected reload")

        // A valid change: only the sink restarts, onto the new path.
        try write(pipeline("b.jsonl"))
        kill(process.processIdentifier, SIGHUP)
        #expect(await Poll.until { count("reloaded: restarted sinks.out, unchanged 1") == 1 })
        #expect(await Poll.until { ids("b.jsonl").count >= 50 })
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(stderr())")

        let all = ids("a.jsonl") + ids("b.jsonl")
        #expect(Set(all).count == all.count, "a position was written twice")
        let seconds = all.compactMap { $0.split(separator: "-").last.flatMap { Int64($0) }.map { $0 / 1000 } }
        let gaps = zip(seconds, seconds.dropFirst()).filter { $1 - $0 != 1 }
        #expect(gaps.isEmpty, "positions lost or out of order between \(gaps)")
        #expect(server.connections == 1, "the source reconnected")
    }
}
