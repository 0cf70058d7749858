import GatewayCore
import Testing
@testable import Filters

/// One scripted sequence through a filter and the indices expected to pass.
struct Script: CustomTestStringConvertible, Sendable {
    let name: String
    let positions: [Position]
    let passed: [Int]
    var testDescription: String { name }
}

@Suite struct DistanceFilterTests {
    static let scripts: [Script] = [
        Script(name: "stationary with a 60 s heartbeat passes one fix a minute by the fixes' times",
               positions: (0...20).map { fix(Double($0) * 10, north: $0 % 2 == 0 ? 0 : 2) },
               passed: [0, 6, 12, 18]),
        Script(name: "stationary, heartbeat counted from the last passed fix, not from a fixed grid",
               positions: [fix(0), fix(30), fix(45, north: 30), fix(90, north: 30), fix(104, north: 30), fix(105, north: 30), fix(150, north: 30)],
               passed: [0, 2, 5]),
        Script(name: "moving 20 m a second passes every fix",
               positions: (0..<10).map { fix(Double($0), north: Double($0) * 20) },
               passed: Array(0..<10)),
        Script(name: "slow drift passes once the distance from the last passed fix reaches 10 m",
               positions: (0..<10).map { fix(Double($0), north: Double($0) * 3) },
               passed: [0, 4, 8]),
        Script(name: "the first fix after a gap passes, the next stationary one does not",
               positions: [fix(0), fix(1), fix(2), fix(100), fix(101), fix(102)],
               passed: [0, 3]),
        Script(name: "a geofence event passes even when stationary",
               positions: [fix(0), fix(1), fix(2, event: .enter), fix(3), fix(4, event: .exit)],
               passed: [0, 2, 4]),
        Script(name: "devices are filtered separately",
               positions: [fix(0, device: "a"), fix(0, device: "b"), fix(1, device: "a"), fix(1, north: 50, device: "b"), fix(2, north: 50, device: "a")],
               passed: [0, 1, 3, 4]),
        Script(name: "time going backwards by more than late_limit (a replay restarting) starts afresh",
               positions: [fix(7200), fix(7201), fix(0), fix(1)],
               passed: [0, 2]),
    ]

    @Test(arguments: scripts)
    func passesWhatMovedAndTheHeartbeat(_ script: Script) {
        var t = DistanceFilterTransform(configuration: DistanceFilterConfiguration(minDistance: 10, heartbeat: .seconds(60), gap: .seconds(60)), stats: ComponentStats(id: "t"))
        #expect(passedIndices(&t, script.positions) == script.passed)
    }

    @Test func withoutHeartbeatAStationaryDeviceSendsOnlyItsFirstFix() throws {
        let (c, problems) = try configure(DistanceFilterPlugin.self, #"{"min_distance_m": 10, "gap": "5m"}"#)
        #expect(problems.isEmpty)
        #expect(c.heartbeat == nil)
        let stats = ComponentStats(id: "t")
        var t = DistanceFilterTransform(configuration: c, stats: stats)
        #expect(passedIndices(&t, (0..<30).map { fix(Double($0) * 10) }) == [0])
        #expect(stats.dropped == 29)
        #expect(stats.value("dropped.stationary") == 29)
    }

    @Test func aNoisyTrackKeepsEveryRealMoveAndTheHeartbeat() {
        // 60 s parked with ±4 m noise, then a drive at 12 m/s, then parked again.
        var positions: [Position] = []
        let noise: [Double] = [0, 3, -4, 2, -1, 4, -3, 1]
        for i in 0..<60 { positions.append(fix(Double(i), north: noise[i % noise.count])) }
        for i in 0..<30 { positions.append(fix(Double(60 + i), north: Double(i + 1) * 12)) }
        for i in 0..<130 { positions.append(fix(Double(90 + i), north: 360 + noise[i % noise.count])) }
        var t = DistanceFilterTransform(configuration: DistanceFilterConfiguration(minDistance: 10, heartbeat: .seconds(60)), stats: ComponentStats(id: "t"))
        let passed = passedIndices(&t, positions)
        // Every driving fix is 10 m from the one before it.
        for i in 60..<90 { #expect(passed.contains(i), "driving fix \(i) was swallowed") }
        // Parked: the heartbeat fires once a minute, nothing else passes.
        #expect(passed.filter { $0 < 60 } == [0])
        let parkedAgain = passed.filter { $0 >= 90 }.map { Int(positions[$0].time!.seconds(since: positions[89].time!)) }
        #expect(parkedAgain == [60, 120])
    }

    @Test func rejectsBadOptionsWithTheirPaths() throws {
        let (_, problems) = try configure(DistanceFilterPlugin.self, #"{"min_distance_m": -1, "heartbeat": "soon", "gap": 0, "min_distance": 3}"#)
        #expect(problems.contains { $0.hasPrefix("transforms.t.min_distance_m:") })
        #expect(problems.contains { $0.hasPrefix("transforms.t.heartbeat:") })
        #expect(problems.contains { $0.hasPrefix("transforms.t.gap:") })
        #expect(problems.contains { $0.hasPrefix("transforms.t.min_distance: unknown option; did you mean \"min_distance_m\"? options: ") })
    }
}

@Suite struct ThrottleTests {
    @Test func passesOnePositionPerIntervalPerDevice() throws {
        let (c, problems) = try configure(ThrottlePlugin.self, #"{"interval": "2m"}"#)
        #expect(problems.isEmpty)
        let stats = ComponentStats(id: "t")
        var t = ThrottleTransform(configuration: c, stats: stats)
        let positions = [fix(0, device: "a"), fix(10, device: "b"), fix(60, device: "a"), fix(119.9, device: "a"),
                         fix(120, device: "a"), fix(125, device: "b"), fix(130, device: "b"), fix(130, device: "a"),
                         fix(200, device: "a", event: .exit), fix(240, device: "a"), fix(320, device: "a")]
        #expect(passedIndices(&t, positions) == [0, 1, 4, 6, 8, 10])
        #expect(stats.value("dropped.throttled") == 5)
    }

    @Test func dropsPositionsWithoutTime() {
        let stats = ComponentStats(id: "t")
        var t = ThrottleTransform(configuration: ThrottleConfiguration(interval: .seconds(1)), stats: stats)
        #expect(passedIndices(&t, [fix(nil), fix(0)]) == [1])
        #expect(stats.value("dropped.no_time") == 1)
    }

    @Test func requiresAnInterval() throws {
        let (_, problems) = try configure(ThrottlePlugin.self, "{}")
        #expect(problems == ["transforms.t.interval: required option is missing"])
    }
}

@Suite struct QualityFilterTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let position: Position
        let reason: String?
        var testDescription: String { name }
    }

    static func with(_ change: (inout Position) -> Void) -> Position {
        var p = fix(0)
        p.hdop = 1.2; p.satellites = 9; p.horizontalError = 3
        change(&p)
        return p
    }

    static let cases: [Case] = [
        Case(name: "a good 3D fix passes", position: with { _ in }, reason: nil),
        Case(name: "no time", position: with { $0.time = nil }, reason: "no_time"),
        Case(name: "no fix", position: with { $0.mode = .noFix }, reason: "mode"),
        Case(name: "2D below a 3D minimum", position: with { $0.mode = .twoD }, reason: "mode"),
        Case(name: "3D without coordinates", position: with { $0.latitude = nil }, reason: "mode"),
        Case(name: "HDOP above the limit", position: with { $0.hdop = 4.1 }, reason: "hdop"),
        Case(name: "missing HDOP is not judged", position: with { $0.hdop = nil }, reason: nil),
        Case(name: "too few satellites", position: with { $0.satellites = 3 }, reason: "satellites"),
        Case(name: "horizontal error above the limit", position: with { $0.horizontalError = 30 }, reason: "horizontal_error"),
        Case(name: "the first failing check is the one counted", position: with { $0.hdop = 9; $0.satellites = 2 }, reason: "hdop"),
    ]

    @Test(arguments: cases)
    func dropsAndCountsByReason(_ c: Case) throws {
        let (config, problems) = try configure(QualityFilterPlugin.self,
            #"{"min_mode": "3d", "max_hdop": 4, "min_satellites": 5, "max_horizontal_error": 25, "require_time": true}"#)
        #expect(problems.isEmpty)
        let stats = ComponentStats(id: "t")
        var t = QualityFilterTransform(configuration: config, stats: stats)
        let passed = passedIndices(&t, [c.position])
        #expect(passed == (c.reason == nil ? [0] : []))
        if let reason = c.reason {
            #expect(stats.value("dropped.\(reason)") == 1)
            #expect(stats.dropped == 1)
            #expect(stats.namedValues.count == 1)
        } else {
            #expect(stats.dropped == 0)
        }
    }

    @Test func defaultsRequireA2DFixAndATime() {
        let stats = ComponentStats(id: "t")
        var t = QualityFilterTransform(configuration: QualityFilterConfiguration(), stats: stats)
        var twoD = fix(1); twoD.mode = .twoD; twoD.hdop = 50
        var none = fix(2); none.mode = .noFix
        #expect(passedIndices(&t, [twoD, none, fix(nil)]) == [0])
        #expect(stats.value("dropped.mode") == 1)
        #expect(stats.value("dropped.no_time") == 1)
    }
}

@Suite struct JumpFilterTests {
    static let scripts: [Script] = [
        Script(name: "a single multipath jump is dropped",
               positions: [fix(0), fix(1, north: 10), fix(2, north: 5_000), fix(3, north: 30), fix(4, north: 40)],
               passed: [0, 1, 3, 4]),
        Script(name: "a relocation is accepted after reset_after consecutive rejects",
               positions: [fix(0), fix(1, north: 10), fix(2, north: 10_000), fix(3, north: 10_010), fix(4, north: 10_020),
                           fix(5, north: 10_030), fix(6, north: 10_040)],
               passed: [0, 1, 5, 6]),
        Script(name: "a good fix between jumps restarts the reject count",
               positions: [fix(0), fix(1, north: 9_000), fix(2, north: 9_000), fix(3, north: 20), fix(4, north: 9_000), fix(5, north: 9_000), fix(6, north: 40)],
               passed: [0, 3, 6]),
        Script(name: "a long gap allows a long move",
               positions: [fix(0), fix(1000, north: 30_000)],
               passed: [0, 1]),
        Script(name: "the same time in another place is a jump",
               positions: [fix(0), fix(0, north: 100)],
               passed: [0]),
        Script(name: "devices are judged separately",
               positions: [fix(0, device: "a"), fix(1, north: 5_000, device: "b"), fix(2, north: 10, device: "a")],
               passed: [0, 1, 2]),
    ]

    @Test(arguments: scripts)
    func dropsJumpsAndResets(_ script: Script) throws {
        let (c, problems) = try configure(JumpFilterPlugin.self, #"{"max_speed": 50, "reset_after": 3}"#)
        #expect(problems.isEmpty)
        var t = JumpFilterTransform(configuration: c, stats: ComponentStats(id: "t"))
        #expect(passedIndices(&t, script.positions) == script.passed)
    }

    @Test func countsJumpsAndResets() {
        let stats = ComponentStats(id: "t")
        var t = JumpFilterTransform(configuration: JumpFilterConfiguration(maxSpeed: 50, resetAfter: 2), stats: stats)
        _ = passedIndices(&t, [fix(0), fix(1, north: 10_000), fix(2, north: 10_010), fix(3, north: 10_020)])
        #expect(stats.value("dropped.jump") == 2)
        #expect(stats.value("resets") == 1)
        #expect(stats.dropped == 2)
    }
}

@Suite struct DedupeTests {
    @Test func dropsTheSameTimeAndPlacePerDevice() {
        let stats = ComponentStats(id: "t")
        var t = DedupeTransform(stats: stats)
        var repeated = fix(1); repeated.id = "again"
        let positions = [fix(1), repeated, fix(1, device: "b"), fix(2), fix(2, north: 5), fix(1, north: 5, device: "b"),
                         { var p = fix(2, north: 5); p.id = "evt"; p.event = FenceEvent(kind: .enter, fenceId: "f"); return p }()]
        #expect(passedIndices(&t, positions) == [0, 2, 3, 4, 5, 6])
        #expect(stats.value("dropped.duplicate") == 1)
    }
}

@Suite struct SetTests {
    @Test func setsDeviceAndAttributesFromTheEnvironment() throws {
        let (c, problems) = try configure(SetPlugin.self, #"{"device": "${DEVICE_ID}", "attributes": {"vip": "${VIP:-7}", "fleet": "north", "slot": 3}}"#,
                                          environment: ["DEVICE_ID": "truck-12"])
        #expect(problems.isEmpty)
        var t = SetTransform(configuration: c)
        var out: [Position] = []
        var p = fix(0); p.attributes = ["fleet": "south", "keep": "yes"]
        t.process(p, into: &out)
        #expect(out.first?.device == "truck-12")
        #expect(out.first?.attributes == ["vip": "7", "fleet": "north", "slot": "3", "keep": "yes"])
    }

    @Test func withoutOverwriteOnlyFillsInMissingValues() throws {
        let (c, _) = try configure(SetPlugin.self, #"{"device": "cfg", "attributes": {"fleet": "north", "vip": "1"}, "overwrite": false}"#)
        var t = SetTransform(configuration: c)
        var out: [Position] = []
        var p = fix(0, device: "serial-9"); p.attributes = ["fleet": "south"]
        t.process(p, into: &out)
        var q = fix(1); q.device = nil
        t.process(q, into: &out)
        #expect(out.map(\.device) == ["serial-9", "cfg"])
        #expect(out[0].attributes == ["fleet": "south", "vip": "1"])
    }

    @Test func reportsAnUnsetVariableAndAnEmptyConfiguration() throws {
        let (_, unset) = try configure(SetPlugin.self, #"{"device": "${NOPE}"}"#)
        #expect(unset.contains { $0.hasPrefix("transforms.t.device: environment variable NOPE is not set") })
        let (_, empty) = try configure(SetPlugin.self, "{}")
        #expect(empty.count == 1)
        #expect(empty.first?.hasPrefix("transforms.t: set needs") == true)
    }
}

@Suite struct FiltersDocumentationTests {
    static let plugins: [PluginInfo] = [DistanceFilterPlugin.info, ThrottlePlugin.info, QualityFilterPlugin.info,
                                        JumpFilterPlugin.info, DedupePlugin.info, SetPlugin.info]

    @Test(arguments: plugins.map(\.type))
    func readmeTableMatchesTheOptions(_ type: String) throws {
        let info = try #require(Self.plugins.first { $0.type == type })
        #expect(try readmeOptionNames(folder: "Filters", type: type) == info.options.map(\.name))
    }

    @Test(arguments: plugins.map(\.type))
    func sampleConfigurationIsValidAndEveryOptionIsRead(_ type: String) throws {
        let info = try #require(Self.plugins.first { $0.type == type })
        guard case .object(let object) = try JSONValue.parse(string: info.sample) else { Issue.record("sample is not an object"); return }
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: "t", diagnostics: diagnostics, environment: [:])
        reader.markKnown(["type", "inputs"])
        let registry = PluginRegistry.filters
        let plugin = try #require(registry.plugin(kind: .transform, type: type))
        _ = plugin.prepare(&reader)
        reader.finish()
        #expect(diagnostics.problems.isEmpty, "\(diagnostics.problems)")
        #expect(Set(reader.askedKeys) == Set(info.options.map(\.name)))
    }
}

extension PluginRegistry {
    static let filters: PluginRegistry = {
        var r = PluginRegistry()
        r.register(transform: DistanceFilterPlugin.self)
        r.register(transform: ThrottlePlugin.self)
        r.register(transform: QualityFilterPlugin.self)
        r.register(transform: JumpFilterPlugin.self)
        r.register(transform: DedupePlugin.self)
        r.register(transform: SetPlugin.self)
        return r
    }()
}

@Suite struct FilterChainTests {
    @Test func aNoisyTrackThroughQualityJumpAndDistanceKeepsMovesAndHeartbeats() {
        // Parked 0–119 s with ±4 m noise, a bad-HDOP fix and a multipath jump; a 12 m/s drive
        // 120–149 s; parked again 150–300 s.
        let noise: [Double] = [0, 3, -4, 2, -1, 4, -3, 1]
        var track: [Position] = []
        for i in 0..<120 {
            var p = fix(Double(i), north: noise[i % noise.count])
            p.hdop = i == 30 ? 25 : 0.9
            if i == 31 { p.latitude = 30.02 } // ~2 km jump for one second
            track.append(p)
        }
        for i in 0..<30 { track.append(fix(Double(120 + i), north: Double(i + 1) * 12)) }
        for i in 0..<151 { track.append(fix(Double(150 + i), north: 360 + noise[i % noise.count])) }

        let stats = (quality: ComponentStats(id: "q"), jump: ComponentStats(id: "j"), distance: ComponentStats(id: "d"))
        var quality = QualityFilterTransform(configuration: QualityFilterConfiguration(minMode: .threeD, maxHDOP: 5), stats: stats.quality)
        var jump = JumpFilterTransform(configuration: JumpFilterConfiguration(maxSpeed: 50, resetAfter: 5), stats: stats.jump)
        var distance = DistanceFilterTransform(configuration: DistanceFilterConfiguration(minDistance: 10, heartbeat: .seconds(60)), stats: stats.distance)
        var out: [Position] = []
        for p in track {
            var a: [Position] = [], b: [Position] = []
            quality.process(p, into: &a)
            for q in a { jump.process(q, into: &b) }
            for q in b { distance.process(q, into: &out) }
        }
        let times = out.map { Int($0.time!.seconds(since: track[0].time!)) }
        #expect(stats.quality.value("dropped.hdop") == 1)
        #expect(stats.jump.value("dropped.jump") == 1)
        // Parked: first fix and one heartbeat a minute; driving: every fix; parked again: heartbeats.
        #expect(times == [0, 60] + Array(120..<150) + [209, 269])
    }
}
