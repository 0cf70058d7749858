import GatewayCore
import Testing

/// ReceiverHealth driven by explicit instants (the same values a ManualClock would give).
@Suite struct ReceiverHealthTests {
    let start = Timestamp(year: 2026, month: 1, day: 1)
    let stats = ComponentStats(id: "rx")

    func at(_ seconds: Double) -> Timestamp { Timestamp(milliseconds: start.milliseconds + Int64(seconds * 1000)) }

    func monitor(fix: Duration = .seconds(5), data: Duration = .seconds(3)) -> ReceiverHealth {
        ReceiverHealth(configuration: HealthConfiguration(fixTimeout: fix, dataTimeout: data), source: "rx",
                       logger: Logger(label: "sources.rx", handler: SilentLogHandler()), stats: stats)
    }

    func fix(_ n: Int, mode: FixMode = .threeD) -> Position {
        Position(time: at(Double(n)), latitude: mode >= .twoD ? 48.1 + Double(n) * 1e-5 : nil, longitude: mode >= .twoD ? 11.5 : nil,
                 mode: mode, source: "rx", device: "gps0", id: "rx-\(n)")
    }

    func kinds(_ out: [Position]) -> [String] { out.map { $0.event?.kind.rawValue ?? "pos" } }

    @Test func fixLostAfterTheTimeoutAndRegainedByTheNextFix() {
        var h = monitor()
        var out: [Position] = []
        h.record([fix(0)], at: at(0), into: &out)
        for s in 1...4 {
            h.dataReceived(device: "gps0", at: at(Double(s)), into: &out)
            h.record([fix(s, mode: .noFix)], at: at(Double(s)), into: &out)
            h.check(at: at(Double(s)), into: &out)
        }
        #expect(kinds(out) == ["pos", "pos", "pos", "pos", "pos"])
        h.dataReceived(device: "gps0", at: at(5), into: &out)
        h.check(at: at(5), into: &out)
        #expect(kinds(out).last == "fix_lost")
        let lost = out[out.count - 1]
        #expect(lost.latitude == fix(0).latitude, "carries the last fix's coordinates")
        #expect(lost.mode == .noFix && lost.time == at(5) && lost.device == "gps0")
        h.check(at: at(9), into: &out)
        #expect(kinds(out).filter { $0 == "fix_lost" }.count == 1, "reported once per outage")
        h.record([fix(10)], at: at(10), into: &out)
        #expect(kinds(out).suffix(2) == ["pos", "fix_regained"])
        #expect(out.last?.id == "rx-10-fix_regained")
        #expect(stats.value("health.fix_lost") == 1 && stats.value("health.fix_regained") == 1)
    }

    @Test func noDataAfterSilenceAndResumedByData() {
        var h = monitor(fix: .seconds(100))
        var out: [Position] = []
        h.dataReceived(device: "gps0", at: at(0), into: &out)
        h.check(at: at(2.9), into: &out)
        #expect(out.isEmpty)
        h.check(at: at(3), into: &out)
        #expect(kinds(out) == ["no_data"])
        #expect(stats.value("health.silent_devices") == 1)
        h.dataReceived(device: "gps0", at: at(7), into: &out)
        #expect(kinds(out) == ["no_data", "data_resumed"])
        #expect(stats.value("health.silent_devices") == 0)
    }

    @Test func antennaChangesAreEventsButAFirstOkIsNot() {
        var h = monitor()
        var out: [Position] = []
        h.antenna(.ok, device: "gps0", at: at(0), into: &out)
        h.antenna(.ok, device: "gps0", at: at(1), into: &out)
        #expect(out.isEmpty)
        h.antenna(.open, device: "gps0", at: at(2), into: &out)
        h.antenna(.open, device: "gps0", at: at(3), into: &out)
        h.antenna(.ok, device: "gps0", at: at(4), into: &out)
        #expect(out.map { $0.event?.status } == ["open", "ok"])
        // Written as `"event":{"type":"antenna","status":"open"}` (PositionEncodingTests).
        #expect(out[0].event == PositionEvent(kind: .antenna, status: "open"))
    }

    @Test func asleepTimeDoesNotCount() {
        var h = monitor(fix: .seconds(5), data: .seconds(3))
        var out: [Position] = []
        h.record([fix(0)], at: at(0), into: &out)
        h.dataReceived(device: "gps0", at: at(2), into: &out)
        h.suspend(device: "gps0", at: at(2))
        h.check(at: at(60), into: &out)
        #expect(kinds(out) == ["pos"], "a duty-cycled receiver is silent on purpose")
        h.resume(device: "gps0", at: at(60))
        h.check(at: at(62), into: &out)
        #expect(kinds(out) == ["pos"])
        h.check(at: at(63), into: &out)
        #expect(kinds(out) == ["pos", "no_data", "fix_lost"], "awake time adds up: 2 s before the sleep and 3 s after it")
    }
}

@Suite struct DutyScheduleTests {
    @Test func windowsAreAlignedToTheWallClock() {
        let s = DutySchedule(on: .seconds(10), every: .seconds(120), offset: .seconds(30))
        let base = Timestamp(year: 2026, month: 1, day: 1, hour: 12)  // a multiple of 2 min
        let inside = s.phase(at: Timestamp(milliseconds: base.milliseconds + 35_000))
        #expect(inside.inside && inside.start.milliseconds == base.milliseconds + 30_000 && inside.end.milliseconds == base.milliseconds + 40_000)
        let outside = s.phase(at: Timestamp(milliseconds: base.milliseconds + 40_000))
        #expect(!outside.inside && outside.nextStart.milliseconds == base.milliseconds + 150_000)
        let before = s.phase(at: Timestamp(milliseconds: base.milliseconds + 29_999))
        #expect(!before.inside && before.nextStart.milliseconds == base.milliseconds + 30_000)
        #expect(s.onSecondsPerHour == 300)
    }

    @Test func bestIsTheFirstGoodEnoughFixElseTheLast() {
        var c = DutyCycleConfiguration(on: .seconds(2), every: .seconds(6))
        c.maxHDOP = 2
        var sel = DutyWindowSelector(configuration: c)
        func p(_ id: String, hdop: Double, fix: Bool = true) -> Position {
            Position(latitude: fix ? 1 : nil, longitude: fix ? 2 : nil, mode: fix ? .threeD : .noFix, hdop: hdop, id: id)
        }
        var out: [Position] = []
        sel.offer([p("a", hdop: 5), p("b", hdop: 3, fix: false), p("c", hdop: 4)], into: &out)
        #expect(out.isEmpty)
        sel.close(into: &out)
        #expect(out.map(\.id) == ["c"])
        out = []
        sel.offer([p("d", hdop: 5), p("e", hdop: 1.5), p("f", hdop: 1)], into: &out)
        sel.close(into: &out)
        #expect(out.map(\.id) == ["e"])
    }
}
