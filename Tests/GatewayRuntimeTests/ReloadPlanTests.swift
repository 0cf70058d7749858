import PluginCatalog
import GatewayCore
@testable import GatewayRuntime
import Testing

/// What a reload decides, from two configurations alone: no pipeline, no task, no file opened.
@Suite struct ReloadPlanTests {
    /// A pipeline file as `locgate run` loads it (loading reads options; it builds nothing).
    func configuration(settings: String = "{}", sources: String = #"{ "rx": { "type": "file", "path": "/logs/a.nmea" } }"#,
                       transforms: String = "{}", sinks: String) throws -> PipelineConfiguration {
        let json = #"{ "settings": \#(settings), "sources": \#(sources), "transforms": \#(transforms), "sinks": \#(sinks) }"#
        return try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry)
    }

    let fileSink = #"{ "out": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl" } }"#

    @Test func theSameConfigurationKeepsEveryComponentAndChangesNoSetting() throws {
        let running = try configuration(sinks: fileSink)
        let plan = ReloadPlan(running: running, new: try configuration(sinks: fileSink))
        #expect(plan.keepsEveryComponent)
        #expect(plan.unchanged == 2)
        #expect(plan.restarted.isEmpty && plan.added.isEmpty && plan.removed.isEmpty)
        #expect(!plan.appliesSettings && !plan.restartsStats && plan.needsRestart.isEmpty)
        #expect(plan.buildsAfterOldSinksStop.isEmpty)
    }

    @Test func aChangedDescriptionIsNoChange() throws {
        let running = try configuration(sinks: fileSink)
        let described = #"{ "out": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl", "description": "the archive" } }"#
        #expect(ReloadPlan(running: running, new: try configuration(sinks: described)).keepsEveryComponent)
    }

    @Test(arguments: [
        // An option, the inputs, the buffer: each restarts the sink alone.
        #"{ "out": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl", "fsync": true } }"#,
        #"{ "out": { "type": "file", "inputs": ["rx", "b"], "path": "/data/a.jsonl" } }"#,
        #"{ "out": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl", "buffer": { "max_positions": 10 } } }"#,
    ])
    func aSinkWhoseOptionsInputsOrBufferChangedRestartsAndKeepsItsCounters(sinks: String) throws {
        let sources = #"{ "rx": { "type": "file", "path": "/logs/a.nmea" }, "b": { "type": "file", "path": "/logs/b.nmea" } }"#
        let plan = ReloadPlan(running: try configuration(sources: sources, sinks: fileSink), new: try configuration(sources: sources, sinks: sinks))
        #expect(plan.restarted == ["sinks.out"])
        #expect(plan.added.isEmpty && plan.removed.isEmpty)
        #expect(plan.unchanged == 2)
        #expect(plan.keepsCounters == ["sinks.out"])
        #expect(plan.builds("sinks.out") && plan.replaces("sinks.out"))
        #expect(!plan.builds("sources.rx") && !plan.replaces("sources.rx"))
    }

    @Test func aSinkOfAnotherTypeRestartsWithCountersOfItsOwn() throws {
        let stdout = #"{ "out": { "type": "stdout", "inputs": ["rx"] } }"#
        let plan = ReloadPlan(running: try configuration(sinks: fileSink), new: try configuration(sinks: stdout))
        #expect(plan.restarted == ["sinks.out"])
        #expect(plan.keepsCounters.isEmpty)
    }

    @Test func addedComponentsComeInTheNewOrderAndRemovedOnesInTheRunningOrder() throws {
        let running = try configuration(
            sources: #"{ "rx": { "type": "file", "path": "/logs/a.nmea" }, "b": { "type": "file", "path": "/logs/b.nmea" }, "c": { "type": "file", "path": "/logs/c.nmea" } }"#,
            sinks: #"{ "out": { "type": "file", "inputs": ["rx", "b", "c"], "path": "/data/a.jsonl" } }"#)
        let new = try configuration(
            sources: #"{ "rx": { "type": "file", "path": "/logs/a.nmea" }, "z": { "type": "file", "path": "/logs/z.nmea" }, "y": { "type": "file", "path": "/logs/y.nmea" } }"#,
            sinks: #"{ "out": { "type": "file", "inputs": ["rx", "z", "y"], "path": "/data/a.jsonl" } }"#)
        let plan = ReloadPlan(running: running, new: new)
        #expect(plan.added == ["sources.z", "sources.y"])
        #expect(plan.removed == ["sources.b", "sources.c"])
        #expect(plan.restarted == ["sinks.out"])
        #expect(plan.unchanged == 1)
        #expect(plan.replaces("sources.b") && !plan.builds("sources.b"))
        #expect(plan.builds("sources.z") && !plan.replaces("sources.z"))
    }

    @Test func anIdThatMovesToAnotherSectionIsRemovedThereAndAddedHere() throws {
        let running = try configuration(sources: #"{ "a": { "type": "file", "path": "/logs/a.nmea" } }"#,
                                        sinks: #"{ "out": { "type": "stdout", "inputs": ["a"] } }"#)
        let new = try configuration(sources: #"{ "rx": { "type": "file", "path": "/logs/a.nmea" } }"#,
                                    transforms: #"{ "a": { "type": "set", "inputs": ["rx"], "device": "van" } }"#,
                                    sinks: #"{ "out": { "type": "stdout", "inputs": ["a"] } }"#)
        let plan = ReloadPlan(running: running, new: new)
        #expect(plan.added == ["sources.rx", "transforms.a"])
        #expect(plan.removed == ["sources.a"])
        #expect(plan.restarted.isEmpty)
        #expect(plan.unchanged == 1)
    }

    @Test func aSinkTakingTheFileOfAReplacedSinkIsBuiltOnlyAfterThatSinkStopped() throws {
        // `out` moves to another file and `archive` takes its old one: `archive` must not open
        // the file while `out` still writes it; `out`'s new file is free at once.
        let new = try configuration(sinks: #"""
            { "out": { "type": "file", "inputs": ["rx"], "path": "/data/b.jsonl" },
              "archive": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl" } }
            """#)
        let plan = ReloadPlan(running: try configuration(sinks: fileSink), new: new)
        #expect(plan.restarted == ["sinks.out"])
        #expect(plan.added == ["sinks.archive"])
        #expect(plan.buildsAfterOldSinksStop == ["sinks.archive"])
    }

    @Test func aRestartedSinkKeepingItsFileIsBuiltAfterItsOldInstanceClosedIt() throws {
        let fsync = #"{ "out": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl", "fsync": true } }"#
        let plan = ReloadPlan(running: try configuration(sinks: fileSink), new: try configuration(sinks: fsync))
        #expect(plan.buildsAfterOldSinksStop == ["sinks.out"])
    }

    @Test func aSinkTakingTheFileOfARemovedSinkWaitsForIt() throws {
        let renamed = #"{ "archive": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl" } }"#
        let plan = ReloadPlan(running: try configuration(sinks: fileSink), new: try configuration(sinks: renamed))
        #expect(plan.removed == ["sinks.out"])
        #expect(plan.added == ["sinks.archive"])
        #expect(plan.buildsAfterOldSinksStop == ["sinks.archive"])
    }

    @Test func aFileHeldByASinkThatKeepsRunningDefersNothing() throws {
        // The unchanged sink keeps its file; the added one claims another (validation rejects two
        // claims of one file, so there is nothing to wait for).
        let plan = ReloadPlan(running: try configuration(sinks: fileSink), new: try configuration(sinks: #"""
            { "out": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl" },
              "copy": { "type": "file", "inputs": ["rx"], "path": "/data/copy.jsonl" } }
            """#))
        #expect(plan.added == ["sinks.copy"])
        #expect(plan.buildsAfterOldSinksStop.isEmpty)
    }

    @Test func theStatsIntervalAndShutdownTimeoutApplyAtOnce() throws {
        let running = try configuration(sinks: fileSink)
        let stats = ReloadPlan(running: running, new: try configuration(settings: #"{ "stats_interval": "5s" }"#, sinks: fileSink))
        #expect(stats.appliesSettings && stats.restartsStats)
        #expect(stats.keepsEveryComponent && stats.needsRestart.isEmpty)
        let timeout = ReloadPlan(running: running, new: try configuration(settings: #"{ "shutdown_timeout": "3s" }"#, sinks: fileSink))
        #expect(timeout.appliesSettings && !timeout.restartsStats)
    }

    @Test func logLevelStateAndThreadsNeedARestartAndSaySoInThatOrder() throws {
        let running = try configuration(sinks: fileSink)
        let new = try configuration(settings: #"{ "threads": 2, "log_level": "debug", "state": { "path": "/var/lib/locgate/state.sqlite" } }"#,
                                    sinks: fileSink)
        let plan = ReloadPlan(running: running, new: new)
        #expect(plan.needsRestart.map(\.path) == ["settings.log_level", "settings.state", "settings.threads"])
        #expect(plan.needsRestart.map(\.warning) == [
            "settings.log_level changed: that needs a restart; kept the level it started with",
            "settings.state changed: that needs a restart; the state store stays where it is",
            "settings.threads changed: that needs a restart; kept 1",
        ])
        #expect(!plan.appliesSettings)
        #expect(plan.keepsEveryComponent)
    }

    @Test func aSettingThatNeedsARestartIsComparedWithTheValueInEffect() throws {
        // A first reload asked for 2 threads and was told it needs a restart; the running
        // configuration's components come from that reload, its settings from the start. The
        // same file again warns again.
        var running = try configuration(settings: #"{ "threads": 2 }"#, sinks: fileSink)
        running.settings.threads = 1
        let plan = ReloadPlan(running: running, new: try configuration(settings: #"{ "threads": 2 }"#, sinks: fileSink))
        #expect(plan.needsRestart == [ReloadPlan.RestartNeeded(path: "settings.threads", warning: "settings.threads changed: that needs a restart; kept 1")])
    }

    @Test func theRunningComponentsStayAtHandForASinkThatFallsBack() throws {
        let fsync = #"{ "out": { "type": "file", "inputs": ["rx"], "path": "/data/a.jsonl", "fsync": true } }"#
        let plan = ReloadPlan(running: try configuration(sinks: fileSink), new: try configuration(sinks: fsync))
        #expect(plan.running["sinks.out"]?.fingerprint["fsync"] == nil)
        #expect(plan.running["sinks.out"]?.kind == .sink)
        #expect(plan.running["sinks.archive"] == nil)
    }
}
