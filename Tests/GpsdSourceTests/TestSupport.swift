import Foundation
import GatewayCore
import GpsdSource
import Synchronization

/// Fixtures, gpsd's expected epochs, and a way to run a source and collect what it emits.
enum TestSupport {
    static var fixtures: URL { Bundle.module.resourceURL!.appendingPathComponent("Fixtures/gpsd") }

    static func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: fixtures.appendingPathComponent(name)))
    }

    /// gpsd 3.22's output (Debian's version) for a log.
    static func chk(_ log: String) throws -> [UInt8] { try fixture("chk-release-3.22/\(log).chk") }

    /// Every log with a gpsd 3.22 `.chk`, sorted.
    static var chkLogs: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: fixtures.appendingPathComponent("chk-release-3.22").path)) ?? []
        return names.filter { $0.hasSuffix(".log.chk") }.map { String($0.dropLast(4)) }.sorted()
    }

    /// The package root, from this file's path.
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func context(_ id: String = "gps", logs: LogRecorder = LogRecorder()) -> ComponentContext {
        ComponentContext(id: id, kind: .source, logger: Logger(label: "sources.\(id)", handler: logs), stats: ComponentStats(id: id))
    }

    static func configuration(port: Int, _ edit: (inout GpsdSourceConfiguration) -> Void = { _ in }) -> GpsdSourceConfiguration {
        var c = GpsdSourceConfiguration()
        c.port = port
        c.reconnectMax = .milliseconds(100)
        c.stallTimeout = .seconds(20)
        edit(&c)
        return c
    }

    /// Runs `source` while `body` runs, then cancels it; returns what `body` returns.
    @discardableResult
    static func running<T: Sendable>(
        _ source: GpsdPositionSource, into collector: Collector, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run(output: collector.output) }
            defer { group.cancelAll() }
            return try await body()
        }
    }

    /// Polls `condition` every 50 ms until it holds or `timeout` passes; returns whether it held.
    @discardableResult
    static func waitUntil(timeout: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return condition()
    }
}

/// Collects emitted positions.
final class Collector: Sendable {
    private let positions = Mutex<[Position]>([])

    var output: SourceOutput {
        SourceOutput { [self] batch in self.positions.withLock { $0.append(contentsOf: batch) } }
    }

    var all: [Position] { positions.withLock { $0 } }
    var count: Int { positions.withLock { $0.count } }
}

/// Records log lines so tests can check that faults are logged.
final class LogRecorder: LogHandler {
    private let lines = Mutex<[String]>([])
    var minimumLevel: LogLevel { .debug }
    func log(level: LogLevel, label: String, message: String) {
        lines.withLock { $0.append("\(level.name) \(label): \(message)") }
    }
    var all: [String] { lines.withLock { $0 } }
    func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }
}

/// One epoch as gpsd reported it: the last TPV with a given time.
struct GpsdEpoch {
    var time: Int64
    var mode: Int
    var lat: Double?
    var lon: Double?
    var altMSL: Double?
    var speed: Double?
    var track: Double?
}

/// The comparison rules of the shared data README.
enum GpsdChk {
    /// gpsd's week-rollover heuristic can move a date by exactly 1024 weeks.
    static let rolloverMs: Int64 = 619_315_200_000

    /// The JSON lines of a `.chk` (gpsd's reports; the NMEA lines are its input).
    static func jsonLines(_ chk: [UInt8]) -> [[UInt8]] {
        chk.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }).filter { $0.first == UInt8(ascii: "{") }.map(Array.init)
    }

    /// Steps 1–2: TPVs with a time, the last one per time, in order of first appearance.
    static func epochs(chk: [UInt8]) -> [GpsdEpoch] {
        var byTime: [Int64: GpsdEpoch] = [:]
        var order: [Int64] = []
        for bytes in jsonLines(chk) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  object["class"] as? String == "TPV",
                  let timeText = object["time"] as? String, let time = Timestamp(iso8601: timeText)
            else { continue }
            let e = GpsdEpoch(
                time: time.milliseconds, mode: object["mode"] as? Int ?? 0,
                lat: object["lat"] as? Double, lon: object["lon"] as? Double,
                altMSL: object["altMSL"] as? Double, speed: object["speed"] as? Double,
                track: object["track"] as? Double)
            if byTime[e.time] == nil { order.append(e.time) }
            byTime[e.time] = e
        }
        return order.compactMap { byTime[$0] }
    }

    /// Steps 3–5: every gpsd epoch against our position of the same time; returns the problems.
    static func problems(ours: [Position], gpsd: [GpsdEpoch], strictPresence: Bool = true) -> [String] {
        var byTime: [Int64: Position] = [:]
        var problems: [String] = []
        for p in ours {
            guard let t = p.time?.milliseconds else { problems.append("position without time: \(p.id)"); continue }
            if byTime[t] != nil { problems.append("two positions for \(Timestamp(milliseconds: t))") }
            byTime[t] = p
        }
        for e in gpsd {
            let candidates = [e.time, e.time - rolloverMs, e.time + rolloverMs]
            guard let p = candidates.lazy.compactMap({ byTime[$0] }).first else {
                problems.append("\(Timestamp(milliseconds: e.time)): missing")
                continue
            }
            var diffs: [String] = []
            if p.mode.rawValue != e.mode { diffs.append("mode \(p.mode.rawValue)≠\(e.mode)") }
            func check(_ name: String, _ a: Double?, _ b: Double?, _ tolerance: Double) {
                if let a, let b, abs(a - b) > tolerance { diffs.append("\(name) \(a)≠\(b)") }
                if strictPresence, (a == nil) != (b == nil) { diffs.append("\(name) \(a.map { "\($0)" } ?? "absent")≠\(b.map { "\($0)" } ?? "absent")") }
            }
            check("lat", p.latitude, e.lat, 1e-6)
            check("lon", p.longitude, e.lon, 1e-6)
            check("altMSL", p.altitude, e.altMSL, 1e-3)
            check("speed", p.speed, e.speed, 1e-3)
            check("track", p.course, e.track, 1e-3)
            if !diffs.isEmpty { problems.append("\(Timestamp(milliseconds: e.time)): " + diffs.joined(separator: ", ")) }
        }
        return problems
    }
}
