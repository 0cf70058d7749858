import PluginCatalog
import Foundation
import GatewayCore
import Testing

@Suite struct ConfigurationTests {
    var registry: PluginRegistry {
        var r = BuiltinPlugins.registry
        r.register(transform: PassthroughPlugin.self)
        return r
    }

    func problems(_ json: String, environment: [String: String] = [:]) -> [String] {
        do {
            _ = try PipelineConfiguration.load(json: Array(json.utf8), registry: registry, environment: environment)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    @Test func aValidPipelineLoads() throws {
        let c = try PipelineConfiguration.load(json: Array("""
        { "settings": {"shutdown_timeout": "3s", "stats_interval": "20s"},
          "sources": { "rx": { "type": "file", "path": "x.nmea", "description": "bench log" } },
          "transforms": { "p": { "type": "passthrough", "inputs": ["rx"], "factor": 2 } },
          "sinks": { "out": { "type": "file", "inputs": ["p", "rx"], "path": "out.csv", "buffer": {"max_positions": 50, "when_full": "drop_oldest"} } } }
        """.utf8), registry: registry)
        #expect(c.sources.map(\.id) == ["rx"])
        #expect(c.sinks[0].inputs == ["p", "rx"])
        #expect(c.sinks[0].buffer == .init(maxPositions: 50, whenFull: .dropOldest))
        #expect(c.settings.shutdownTimeout == .seconds(3))
    }

    @Test func unknownTypeNamesTheKnownOnes() {
        let p = problems(#"{"sources":{"rx":{"type":"serail"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#)
        #expect(p.count == 1)
        #expect(p[0].hasPrefix("sources.rx.type: unknown source type \"serail\"; did you mean \"serial\"? known: "))
        #expect(p[0].contains("file"))
    }

    @Test func unknownKeyIsReportedWithItsPath() {
        let p = problems(#"{"sources":{"rx":{"type":"file","path":"a.nmea","rat":"max"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#)
        #expect(p.count == 1)
        #expect(p.first?.hasPrefix(#"sources.rx.rat: unknown option; did you mean "rate"? options: path, "#) == true, "\(p)")
    }

    @Test func anUnknownKeyWithoutALikelyMeaningListsTheOptions() {
        let p = problems(#"{"sources":{"rx":{"type":"file","path":"a.nmea","colour":"red"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#)
        #expect(p.first?.hasPrefix("sources.rx.colour: unknown option; options: path, ") == true, "\(p)")
    }

    @Test func anOptionOfANestedObjectWrittenAtTheTopIsPointedToItsPlace() {
        let p = problems(#"{"sources":{"rx":{"type":"serial","port":"/dev/ttyS0","every":"2m"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#)
        #expect(p.first?.hasPrefix(#"sources.rx.every: unknown option; did you mean "duty_cycle.every"? options: "#) == true, "\(p)")
    }

    @Test func aMisspelledChoiceGetsTheSpellingItMeant() {
        let p = problems(#"{"sources":{"rx":{"type":"file","path":"a.nmea"}},"sinks":{"o":{"type":"file","inputs":["rx"],"path":"o","format":"geojsn"}}}"#)
        #expect(p == [#"sinks.o.format: expected one of "jsonl", "csv", "geojson", "gpx", got "geojsn"; did you mean "geojson"?"#])
    }

    @Test func badValuesAreAllReportedAtOnce() {
        let p = problems("""
        {"settings":{"shutdown_timeout":"abc"},
         "sources":{"rx":{"type":"file","path":"a.nmea","rate":"fast","loop":"yes"}},
         "sinks":{"o":{"type":"file","inputs":["rx"],"path":"o.jsonl","format":"xml","buffer":{"max_positions":0}}}}
        """)
        #expect(p.contains("settings.shutdown_timeout: expected a duration such as \"20s\", got \"abc\""))
        #expect(p.contains("sources.rx.rate: expected \"max\", \"realtime\" or a multiplier such as \"10x\", got \"fast\""))
        #expect(p.contains("sources.rx.loop: expected true or false, got a string"))
        #expect(p.contains("sinks.o.format: expected one of \"jsonl\", \"csv\", \"geojson\", \"gpx\", got \"xml\""))
        #expect(p.contains("sinks.o.buffer.max_positions: must be between 1 and 10000000, got 0"))
        #expect(p.count == 5)
    }

    @Test func theThreadsSettingIsReadAndCheckedWithItsPath() throws {
        func json(_ threads: String?) -> String {
            """
            {"settings":{\(threads.map { "\"threads\":\($0)" } ?? "")},
             "sources":{"rx":{"type":"file","path":"a.nmea"}},"sinks":{"o":{"type":"file","inputs":["rx"],"path":"o.jsonl"}}}
            """
        }
        #expect(try PipelineConfiguration.load(json: Array(json(nil).utf8), registry: registry).settings.threads == 1)
        #expect(try PipelineConfiguration.load(json: Array(json("4").utf8), registry: registry).settings.threads == 4)
        #expect(problems(json("0")) == ["settings.threads: must be between 1 and 64, got 0"])
        #expect(problems(json("65")) == ["settings.threads: must be between 1 and 64, got 65"])
        #expect(problems(json("1.5")) == ["settings.threads: expected a whole number, got 1.5"])
        #expect(problems(json("\"2\"")) == ["settings.threads: expected a number, got a string"])
    }

    @Test func missingAndDanglingInputs() {
        let p = problems("""
        {"sources":{"rx":{"type":"file","path":"a.nmea"}},
         "transforms":{"t":{"type":"passthrough"}},
         "sinks":{"o":{"type":"stdout","inputs":["rx","nowhere"]}, "o2":{"type":"stdout","inputs":["o"]}}}
        """)
        #expect(p.contains("transforms.t.inputs: required option is missing: name the components this transform reads from"))
        #expect(p.contains("sinks.o.inputs[1]: \"nowhere\" names no source or transform"))
        #expect(p.contains("sinks.o2.inputs[0]: \"o\" is a sink; sinks have no output"))
    }

    @Test func anEmptyPipelineIsRejected() {
        #expect(problems(#"{"sources":{},"sinks":{}}"#) == ["sources: a pipeline needs at least one source", "sinks: a pipeline needs at least one sink"])
        #expect(problems("{}") == ["sources: a pipeline needs at least one source", "sinks: a pipeline needs at least one sink"])
    }

    @Test(arguments: ["1e-300x", "0x", "-2x", "1e9x", "nanx"])
    func absurdReplayRatesAreRejected(rate: String) {
        let p = problems(#"{"sources":{"rx":{"type":"file","path":"a.nmea","rate":"\#(rate)"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#)
        #expect(p.count == 1 && p[0].hasPrefix("sources.rx.rate: expected"))
    }

    @Test func cyclesAreReported() {
        let p = problems("""
        {"sources":{"rx":{"type":"file","path":"a.nmea"}},
         "transforms":{"a":{"type":"passthrough","inputs":["rx","c"]},"b":{"type":"passthrough","inputs":["a"]},"c":{"type":"passthrough","inputs":["b"]}},
         "sinks":{"o":{"type":"stdout","inputs":["c"]}}}
        """)
        #expect(p.count == 1)
        #expect(p.first?.contains("cycle:") == true)
        #expect(p.first?.hasPrefix("transforms.") == true)
    }

    @Test func twoComponentsCannotClaimOneFile() {
        let p = problems("""
        {"sources":{"rx":{"type":"file","path":"a.nmea"}},
         "sinks":{"o1":{"type":"file","inputs":["rx"],"path":"same.jsonl"},"o2":{"type":"file","inputs":["rx"],"path":"same.jsonl"}}}
        """)
        #expect(p == ["sinks.o2: file same.jsonl is already claimed by sinks.o1"])
    }

    @Test func environmentVariablesAreSubstituted() throws {
        let json = #"{"sources":{"rx":{"type":"file","path":"${LOGDIR}/a.nmea","device":"${DEV:-unit-7}"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#
        #expect(problems(json, environment: ["LOGDIR": "/data"]).isEmpty)
        #expect(problems(json) == ["sources.rx.path: environment variable LOGDIR is not set (write ${LOGDIR:-default} for a default)"])
    }

    @Test func invalidJSONSaysWhere() {
        let p = problems("{\"sources\": {\n  \"rx\": {\"type\": \"file\",}\n}}")
        #expect(p.count == 1)
        #expect(p[0].hasPrefix("$: not valid JSON: line 2"))
    }

    @Test func everyExampleInDocsValidates() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Docs/examples").standardized
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
        #expect(!files.isEmpty)
        for f in files {
            let data = try Data(contentsOf: dir.appendingPathComponent(f))
            do {
                _ = try PipelineConfiguration.load(json: [UInt8](data), registry: BuiltinPlugins.registry,
                                                   environment: ["LOCGATE_TOKEN": "t", "DEVICE_ID": "d", "HOME": "/root"],
                                                   baseDirectory: dir.path)
            } catch {
                Issue.record("Docs/examples/\(f): \(error)")
            }
        }
    }
}
