import PluginCatalog
import GatewayCore
import GatewayRuntime
import GatewayTesting
import Synchronization
import Testing

/// A `collect` sink for pipeline tests: everything goes to ``CollectSinkPlugin/collector``.
enum CollectSinkPlugin: SinkPlugin {
    static let collector = PositionCollector()
    static let info = PluginInfo(type: "collect", kind: .sink, summary: "test sink", folder: "", options: [], sample: "{}")
    static func configure(_ options: inout OptionReader) {}
    static func makeSink(_ configuration: Void, context: ComponentContext) throws -> any PositionSink {
        CollectingSink(collector: collector)
    }
}

@Suite(.timeLimit(.minutes(3))) struct PipelineResilienceTests {
    @Test func garbageCrashingAndHangingPluginsDoNotHurtTheOthers() async throws {
        var registry = BuiltinPlugins.registry
        registry.register(sink: CollectSinkPlugin.self)
        let walk = "\(packageRoot)/Docs/examples/exec-random-walk.py"
        let config = """
        {
          "settings": { "shutdown_timeout": "10s", "stats_interval": false },
          "sources": {
            "good": { "type": "exec", "format": "jsonl", "command": ["python3", "\(walk)", "--interval", "0.05"] },
            "garbage": { "type": "exec", "format": "jsonl", "command": ["sh", "-c", "while true; do echo 'garbage {'; head -c 200 /dev/urandom; echo; sleep 0.01; done"], "kill_timeout": "200ms" },
            "crashing": { "type": "exec", "format": "nmea", "command": ["sh", "-c", "echo '$GPGGA,junk*11'; kill -SEGV $$"], "restart_initial": "10ms", "restart_max": "50ms" },
            "hanging": { "type": "exec", "command": ["sh", "-c", "trap '' TERM; sleep 600"], "kill_timeout": "300ms" }
          },
          "sinks": { "out": { "type": "collect", "inputs": ["good", "garbage", "crashing", "hanging"] } }
        }
        """
        let configuration = try PipelineConfiguration.load(json: Array(config.utf8), registry: registry)
        let log = RecordingLogHandler(minimumLevel: .info)
        let pipeline = try Pipeline(configuration: configuration, logHandler: log)
        let collector = CollectSinkPlugin.collector
        collector.removeAll()
        let code = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await pipeline.run() }
            group.addTask {
                _ = await collector.waitForCount(10)
                let stats = pipeline.componentStats
                _ = await Poll.until {
                    stats.first { $0.id == "sources.crashing" }.map { $0.value("exec.starts") >= 3 } ?? false
                }
                pipeline.shutdown(reason: "test")
                return nil
            }
            var code: Int32 = -1
            for await r in group { if let r { code = r } }
            return code
        }
        #expect(code == 0)
        #expect(collector.count >= 10)
        #expect(collector.positions.allSatisfy { $0.source == "good" })
        let stats = Dictionary(uniqueKeysWithValues: pipeline.componentStats.map { ($0.id, $0) })
        #expect((stats["sources.garbage"]?.value("exec.bad_lines") ?? 0) > 0)
        #expect((stats["sources.crashing"]?.value("exec.starts") ?? 0) >= 3)
        #expect(await Poll.until { zombieChildren().isEmpty }, "unreaped children")
    }
}
