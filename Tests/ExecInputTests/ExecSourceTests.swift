import ExecInput
import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// The package root, found from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

func configureExec(_ json: String) throws -> ExecSourceConfiguration {
    let o = try #require(try JSONValue.parse(string: json).objectValue)
    let d = ConfigurationDiagnostics()
    var reader = OptionReader(object: o, path: "sources.exec", diagnostics: d, environment: ["HOME": "/root"], baseDirectory: packageRoot)
    let c = ExecSourcePlugin.configure(&reader)
    reader.finish()
    #expect(d.problems.isEmpty, "\(d.problems)")
    return c
}

/// Zombie children of this test process (exited but not reaped yet; other tests' children come
/// and go, so callers poll until there are none).
func zombieChildren() -> [Int32] {
    let me = getpid()
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { name -> Int32? in
        guard let pid = Int32(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 2, fields[0] == "Z", Int32(fields[1]) == me else { return nil }
        return pid
    }
}

@Suite(.timeLimit(.minutes(3)), .serialized) struct ExecSourceTests {
    @Test func runsThePythonExampleAsAJSONLinesPlugin() async throws {
        let c = try configureExec(#"{ "command": ["python3", "Docs/examples/exec-random-walk.py", "--interval", "0.05", "--device", "walker"], "cwd": ".", "format": "jsonl", "env": { "WALK_SEED": "7" } }"#)
        let log = RecordingLogHandler()
        let ctx = SourceConformance.makeContext(id: "walk", log: log)
        let collector = PositionCollector()
        let src = try ExecSourcePlugin.makeSource(c, context: ctx)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            #expect(await collector.waitForCount(5))
            group.cancelAll()
        }
        let p = try #require(collector.positions.first)
        #expect(p.device == "walker")
        #expect(p.source == "walk")
        #expect(p.mode == .threeD)
        #expect(abs((p.latitude ?? 0) - 52.52) < 0.01)
        #expect(Set(collector.positions.map(\.id)).count == collector.count)
        // The script says hello on stderr: logged at warning, labelled with the component.
        #expect(!log.entries(level: .warning, containing: "stderr: random walk from").isEmpty)
        #expect(log.entries(containing: "stderr:").allSatisfy { $0.label == "sources.walk" })
        #expect(await Poll.until { zombieChildren().isEmpty }, "unreaped children")
    }

    @Test func readsNMEAFromAShellCommand() async throws {
        let nmea = (0..<3).map { NMEASamples.epoch($0) }.joined()
        let c = try configureExec(#"{ "command": ["sh", "-c", "printf '%s' \"$NMEA\"; sleep 30"], "env": { "NMEA": \#(JSONValue.string(nmea).jsonText) }, "kill_timeout": "100ms" }"#)
        let ctx = SourceConformance.makeContext()
        let collector = PositionCollector()
        let src = try ExecSourcePlugin.makeSource(c, context: ctx)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            // Two epochs complete on the next one's sentences, the third on the idle flush.
            #expect(await collector.waitForCount(3))
            group.cancelAll()
        }
        #expect(ctx.stats.value("nmea.accepted") == 6)
    }

    @Test func countsGarbageAndOverlongLinesWithoutFailing() async throws {
        // The overlong line comes last: the conformance check stops the source once it is counted,
        // and lines are read in order, so by then the three bad ones before it were counted too.
        let c = try configureExec(#"{ "command": ["sh", "-c", "echo 'not json'; echo '{\"lat\": 999, \"lon\": 1}'; echo '[1,2'; head -c 3000 /dev/zero | tr '\\0' 'x'; echo; sleep 30"], "format": "jsonl", "max_line_bytes": 1000, "kill_timeout": "100ms" }"#)
        let stats = try await SourceConformance.checkBadInputCounted(counters: ["exec.long_lines"], feedGarbage: {}, make: { ctx in try ExecSourcePlugin.makeSource(c, context: ctx) })
        #expect(stats.value("exec.bad_lines") == 3)
        #expect(stats.value("exec.long_lines") == 1)
    }

    @Test func restartsAProgramThatCrashes() async throws {
        let c = try configureExec(#"{ "command": ["sh", "-c", "echo \"{\\\"lat\\\": 1, \\\"lon\\\": 2, \\\"time\\\": $(date +%s%N | cut -c1-13)e-3}\"; echo boom >&2; exit 3"], "format": "jsonl", "restart_initial": "20ms", "restart_max": "50ms" }"#)
        let log = RecordingLogHandler()
        let ctx = SourceConformance.makeContext(log: log)
        let collector = PositionCollector()
        let src = try ExecSourcePlugin.makeSource(c, context: ctx)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            #expect(await Poll.until { ctx.stats.value("exec.starts") >= 3 && collector.count >= 3 })
            group.cancelAll()
        }
        #expect(!log.entries(level: .warning, containing: "exited with status 3").isEmpty)
        #expect(!log.entries(level: .warning, containing: "stderr: boom").isEmpty)
        #expect(await Poll.until { zombieChildren().isEmpty }, "unreaped children")
    }

    @Test func killsAProgramThatIgnoresSIGTERM() async throws {
        // The shell ignores TERM and so does its child; the process group gets SIGKILL after the grace period.
        let c = try configureExec(#"{ "command": ["sh", "-c", "trap '' TERM; echo started >&2; sleep 600; sleep 600"], "kill_timeout": "200ms" }"#)
        try await SourceConformance.checkCancellation(ready: { ctx, _ in ctx.stats.value("exec.stderr_lines") >= 1 }, make: { ctx in
            try ExecSourcePlugin.makeSource(c, context: ctx)
        })
        #expect(await Poll.until { zombieChildren().isEmpty }, "unreaped children")
    }

    @Test func restartsAProgramThatStalls() async throws {
        let c = try configureExec(#"{ "command": ["sleep", "600"], "stall_timeout": "200ms", "kill_timeout": "100ms", "restart_initial": "20ms" }"#)
        let ctx = SourceConformance.makeContext()
        let src = try ExecSourcePlugin.makeSource(c, context: ctx)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: PositionCollector().output) }
            #expect(await Poll.until { ctx.stats.value("exec.stalls") >= 2 })
            group.cancelAll()
        }
        #expect(ctx.stats.value("exec.starts") >= 2)
    }

    @Test func logsAProgramThatCannotStartAndRetries() async throws {
        let c = try configureExec(#"{ "command": ["/nonexistent/plugin"], "restart_initial": "20ms", "restart_max": "20ms" }"#)
        let ctx = SourceConformance.makeContext()
        let src = try ExecSourcePlugin.makeSource(c, context: ctx)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: PositionCollector().output) }
            #expect(await Poll.until { ctx.stats.value("exec.start_failures") >= 2 })
            group.cancelAll()
        }
    }

    @Test func reportsAMissingCommand() throws {
        let o = try #require(try JSONValue.parse(string: #"{ "command": [], "format": "xml" }"#).objectValue)
        let d = ConfigurationDiagnostics()
        var reader = OptionReader(object: o, path: "sources.exec", diagnostics: d)
        _ = ExecSourcePlugin.configure(&reader)
        #expect(d.problems.map(\.path) == ["sources.exec.command", "sources.exec.format"])
    }
}
