import GatewayCore
import PluginCatalog
import Testing

/// Where per-device state is kept when `settings.state.path` is not given: the sinks with a
/// durable queue declare it (`state-<queue file>` beside the queue), the first of them wins.
@Suite struct StateStorePathTests {
    static func path(_ sinks: String, settings: String = "{}") throws -> String? {
        let json = """
            { "settings": \(settings),
              "sources": { "rx": { "type": "file", "path": "x.nmea" } },
              "transforms": { "moved": { "type": "distance_filter", "inputs": ["rx"], "min_distance_m": 10 } },
              "sinks": \(sinks) }
            """
        return try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry, baseDirectory: "/base").stateStorePath
    }

    @Test(arguments: [
        #"{ "type": "http", "inputs": ["moved"], "url": "http://127.0.0.1:1/", "queue": { "path": "/q/up.sqlite" } }"#,
        #"{ "type": "mqtt", "inputs": ["moved"], "url": "mqtt://127.0.0.1:1", "topic": "t", "queue": { "path": "/q/up.sqlite" } }"#,
        #"{ "type": "nats", "inputs": ["moved"], "servers": ["nats://127.0.0.1:1"], "subject": "s", "queue": { "path": "/q/up.sqlite" } }"#,
        #"{ "type": "postgres", "inputs": ["moved"], "url": "postgresql://locgate@127.0.0.1:1/tracks", "queue": { "path": "/q/up.sqlite" } }"#,
    ])
    func aDurableSinkKeepsTheStateBesideItsQueue(sink: String) throws {
        #expect(try Self.path(#"{ "up": \#(sink) }"#) == "/q/state-up.sqlite")
    }

    @Test func aRelativeQueueGivesARelativePathAndTheFirstDurableSinkWins() throws {
        let sinks = #"""
            { "a": { "type": "file", "inputs": ["moved"], "path": "/out/a.jsonl" },
              "b": { "type": "http", "inputs": ["moved"], "url": "http://127.0.0.1:1/", "queue": null },
              "c": { "type": "http", "inputs": ["moved"], "url": "http://127.0.0.1:1/", "queue": { "path": "q.sqlite" } },
              "d": { "type": "http", "inputs": ["moved"], "url": "http://127.0.0.1:1/", "queue": { "path": "/d/q.sqlite" } } }
            """#
        #expect(try Self.path(sinks)?.hasSuffix("/state-q.sqlite") == true)
        #expect(try Self.path(sinks)?.hasPrefix("/d/") == false)
    }

    @Test func noDurableSinkMeansMemoryAndTheSettingWins() throws {
        let file = #"{ "a": { "type": "file", "inputs": ["moved"], "path": "/out/a.jsonl" } }"#
        #expect(try Self.path(file) == nil, "a file sink claims a file but keeps no queue")
        let durable = #"{ "up": { "type": "http", "inputs": ["moved"], "url": "http://127.0.0.1:1/", "queue": { "path": "/q/up.sqlite" } } }"#
        #expect(try Self.path(durable, settings: #"{ "state": { "path": "/s/state.sqlite" } }"#) == "/s/state.sqlite")
    }
}
