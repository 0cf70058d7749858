import Foundation
import GatewayCore
import GatewayTesting
import LuaRuntime
@testable import LuaScripts
import Testing

/// The `lua` transform: what a script does to positions, its per-device state, and how
/// failures are contained.
@Suite(.timeLimit(.minutes(1))) struct LuaTransformTests {
    /// A transform running `script` (written to a temporary file) with the extra options.
    static func transform(_ script: String, options: String = "", context: ComponentContext = SinkConformance.makeContext()) throws -> (LuaTransform, String) {
        let dir = try makeTemporaryDirectory()
        let path = "\(dir)/script.lua"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        let c = try PluginOptions.valid(LuaTransformPlugin.self, #"{ "script": "\#(path)" \#(options) }"#, path: "transforms.under_test")
        return (try LuaTransform(configuration: c, context: context), path)
    }

    static func position(_ device: String = "van-4", power: String = "13.8", second: Int = 0) -> Position {
        Position(time: Timestamp(year: 2025, month: 1, day: 2, hour: 3, minute: 4, second: second), latitude: 46.05, longitude: 14.5,
                 speed: 3, mode: .threeD, device: device, attributes: ["power": power])
    }

    static func run(_ transform: inout LuaTransform, _ positions: [Position]) -> [Position] {
        var out: [Position] = []
        for p in positions { transform.process(p, into: &out) }
        return out
    }

    static let ignition = """
        function process(p, state)
          p.attributes.ignition = (tonumber(p.attributes.power) or 0) > 13 and "true" or "false"
          return p
        end
        """

    @Test func aScriptComputesAnAttributeAndKeepsTheRest() throws {
        var (t, _) = try Self.transform(Self.ignition)
        let out = Self.run(&t, [Self.position(power: "13.8"), Self.position(power: "12.1", second: 1)])
        #expect(out.map { $0.attributes["ignition"] } == ["true", "false"])
        #expect(out.first?.latitude == 46.05 && out.first?.device == "van-4" && out.first?.mode == .threeD)
        #expect(out.first?.time == Self.position().time)
    }

    @Test func aScriptReturnsSeveralPositionsOrNoneAndEmitsEvents() throws {
        var (t, _) = try Self.transform("""
            function process(p, state)
              if p.speed < 1 then return nil end
              local arrived = { time = p.time, lat = p.lat, lon = p.lon, device = p.device,
                                event = { type = "enter", fence = "depot", name = "Depot" }, attributes = { reason = "script" } }
              return { p, arrived }
            end
            """)
        var slow = Self.position()
        slow.speed = 0.5
        let out = Self.run(&t, [slow, Self.position()])
        #expect(out.count == 2)
        #expect(out.last?.event == PositionEvent(kind: .enter, fenceId: "depot", fenceName: "Depot"))
        #expect(out.last?.attributes == ["reason": "script"])
    }

    @Test func stateIsPerDeviceSurvivesARestartAndLateFixesDoNotChangeIt() throws {
        let counting = """
            function process(p, state)
              state.count = (state.count or 0) + 1
              p.attributes.count = state.count
              return p
            end
            """
        var (t, path) = try Self.transform(counting)
        t.recordStateChanges()
        var late = Self.position(second: 9)
        LateFixes.mark(&late)
        let out = Self.run(&t, [Self.position(), Self.position("bus-1"), Self.position(second: 1), late])
        #expect(out.map { $0.attributes["count"] } == ["1", "1", "2", "3"])
        #expect(Set(t.takeChangedDevices()) == ["van-4", "bus-1"])
        let saved = try #require(t.snapshot(device: "van-4"))
        #expect(saved == .object(JSONObject([("count", .number(2))])), "the late fix's count is not kept")
        // A new instance (after a restart) takes the saved state.
        let c = try PluginOptions.valid(LuaTransformPlugin.self, #"{ "script": "\#(path)" }"#, path: "transforms.under_test")
        var restarted = try LuaTransform(configuration: c, context: SinkConformance.makeContext())
        try restarted.restore(device: "van-4", from: saved)
        #expect(Self.run(&restarted, [Self.position(second: 2)]).first?.attributes["count"] == "3")
    }

    /// Scripts that loop, allocate, reach for the system or fail on every call: each call is
    /// contained, counted by kind, and handled by `on_error`; every position still comes out.
    @Test(arguments: [
        ("while true do end", "budget"),
        ("local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1000) end", "memory"),
        ("local n = #string.rep('x', 10 * 1024 * 1024 * 1024)", "error"),
        ("os.execute('touch /tmp/escaped')", "error"),
        ("io.open('/etc/passwd')", "error"),
        ("require('socket')", "error"),
        ("error('always')", "error"),
    ])
    func aFailingScriptIsContainedAndCounted(body: String, kind: String) throws {
        let context = SinkConformance.makeContext()
        var (t, _) = try Self.transform("function process(p, state)\n  \(body)\n  return p\nend",
                                        options: #", "on_error": "pass", "max_instructions": 100000, "max_memory_mb": 8"#, context: context)
        let out = Self.run(&t, (0..<5_000).map { Self.position(second: $0 % 60) })
        #expect(out.count == 5_000, "every position passed on")
        // Five failures in a row suspend the script: it is not run again for a second, so a
        // script that loops costs five budgets, not one per position.
        #expect(context.stats.value("lua.errors.\(kind)") == LuaBreaker.threshold)
        #expect(context.stats.value("lua.skipped") == 5_000 - LuaBreaker.threshold)
        #expect(context.stats.value("lua.suspensions") == 1)
        #expect(!FileManager.default.fileExists(atPath: "/tmp/escaped"))
    }

    @Test func onErrorDropsOrStops() throws {
        let failing = "function process(p) if p.attributes.power == 'bad' then error('bad power') end return p end"
        let drop = SinkConformance.makeContext()
        var (dropping, _) = try Self.transform(failing, options: #", "on_error": "drop""#, context: drop)
        let positions = [Self.position(), Self.position(power: "bad", second: 1), Self.position(second: 2)]
        #expect(Self.run(&dropping, positions).count == 2)
        #expect(drop.stats.value("dropped.script_error") == 1)
        let stop = SinkConformance.makeContext()
        var (stopping, path) = try Self.transform(failing, options: #", "on_error": "stop""#, context: stop)
        #expect(Self.run(&stopping, positions).count == 1, "nothing after the failure")
        #expect(stop.stats.value("dropped.stopped") == 2)
        // A changed script runs again.
        try Self.ignition.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 5)], ofItemAtPath: path)
        stopping.reloadIfChanged()
        #expect(Self.run(&stopping, [Self.position()]).first?.attributes["ignition"] == "true")
    }

    @Test func aChangedScriptIsSwappedInKeepingStateAndABrokenOneIsRefused() throws {
        let context = SinkConformance.makeContext()
        var (t, path) = try Self.transform("function process(p, state) state.n = (state.n or 0) + 1 return p end", context: context)
        _ = Self.run(&t, [Self.position(), Self.position(second: 1)])
        try "function process(p, state)\n  p.attributes.n = state.n\n  return p\nend".write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 5)], ofItemAtPath: path)
        t.reloadIfChanged()
        #expect(Self.run(&t, [Self.position(second: 2)]).first?.attributes["n"] == "2")
        try "function process(p\n".write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 10)], ofItemAtPath: path)
        t.reloadIfChanged()
        #expect(context.stats.value("lua.reload_failed") == 1)
        #expect(Self.run(&t, [Self.position(second: 3)]).first?.attributes["n"] == "2", "the previous script keeps running")
    }

    @Test func validateReportsACompileErrorWithFileAndLine() throws {
        let dir = try makeTemporaryDirectory()
        let path = "\(dir)/broken.lua"
        try "function process(p)\n  return p +\nend\n".write(toFile: path, atomically: true, encoding: .utf8)
        let c = try PluginOptions.valid(LuaTransformPlugin.self, #"{ "script": "\#(path)" }"#, path: "transforms.t")
        let findings = LuaTransformPlugin.checkEnvironment(c, context: EnvironmentContext(path: "transforms.t"))
        #expect(findings.count == 1)
        #expect(findings.first?.message.contains("broken.lua:3:") == true, "\(findings)")
        try "function other() end".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(LuaTransformPlugin.checkEnvironment(c, context: EnvironmentContext(path: "transforms.t")).first?.message.contains("defines no function process") == true)
    }
}

/// The breaker that keeps a failing script from costing its budget on every position.
@Suite struct LuaBreakerTests {
    @Test func failuresInARowSuspendWithABackoffAndASuccessResets() {
        var breaker = LuaBreaker()
        var tripped = (1...5).map { breaker.failed(now: Int64($0)) }
        #expect(tripped == [false, false, false, false, true])
        #expect(!breaker.allows(now: 1_004) && breaker.allows(now: 1_005))
        for k in 1...5 { _ = breaker.failed(now: 2_000 + Int64(k)) }
        #expect(breaker.suspendedUntil == 2_005 + 2_000, "the second suspension is twice as long")
        breaker.succeeded()
        tripped = (1...5).map { breaker.failed(now: 5_000 + Int64($0)) }
        #expect(tripped.last == true && tripped.dropLast().allSatisfy { !$0 })
        #expect(breaker.suspendedUntil == 5_005 + 1_000, "a success starts the backoff again")
    }
}
