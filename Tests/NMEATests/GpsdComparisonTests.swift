import Foundation
import GatewayCore
import NMEA
import Testing

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

/// The outcome of comparing our positions with one `.chk` file.
struct Comparison {
    var total = 0
    var matched = 0
    /// gpsd epoch time (ms) → what differed.
    var mismatches: [Int64: String] = [:]
    /// Our timed epochs that gpsd did not report.
    var extra: [Int64] = []
    /// Modes of the extra epochs.
    var extraModes: [FixMode] = []
}

enum GpsdChk {
    /// gpsd's week-rollover heuristic can move a date by exactly 1024 weeks.
    static let rolloverMs: Int64 = 619_315_200_000

    /// Steps 1–2 of the data README: TPVs with a time, the last one per time.
    static func epochs(chk: [UInt8]) -> [GpsdEpoch] {
        var byTime: [Int64: GpsdEpoch] = [:]
        var order: [Int64] = []
        // Split bytes, not Characters: "\r\n" is a single Character in Swift.
        for bytes in chk.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }) {
            let rawLine = String(decoding: bytes, as: UTF8.self)
            guard rawLine.hasPrefix("{\"class\":\"TPV\"") else { continue }
            guard let object = try? JSONSerialization.jsonObject(with: Data(rawLine.utf8)) as? [String: Any],
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

    /// Steps 3–5: compare each gpsd epoch with our position of the same time.
    static func compare(ours: [Position], gpsd: [GpsdEpoch]) -> Comparison {
        var byTime: [Int64: Position] = [:]
        for p in ours {
            if let t = p.time?.milliseconds { byTime[t] = p }
        }
        var result = Comparison()
        var used = Set<Int64>()
        for e in gpsd {
            result.total += 1
            let candidates = [e.time, e.time - rolloverMs, e.time + rolloverMs]
            guard let t = candidates.first(where: { byTime[$0] != nil }), let p = byTime[t] else {
                result.mismatches[e.time] = "missing"
                continue
            }
            used.insert(t)
            var diffs: [String] = []
            if p.mode.rawValue != e.mode { diffs.append("mode \(p.mode.rawValue)≠\(e.mode)") }
            func check(_ name: String, _ a: Double?, _ b: Double?, _ tolerance: Double) {
                if let a, let b, abs(a - b) > tolerance { diffs.append("\(name) \(a)≠\(b)") }
            }
            check("lat", p.latitude, e.lat, 1e-6)
            check("lon", p.longitude, e.lon, 1e-6)
            check("altMSL", p.altitude, e.altMSL, 1e-3)
            check("speed", p.speed, e.speed, 1e-3)
            check("track", p.course, e.track, 1e-3)
            if diffs.isEmpty {
                result.matched += 1
            } else {
                result.mismatches[e.time] = diffs.joined(separator: ", ")
            }
        }
        result.extra = byTime.keys.filter { !used.contains($0) }.sorted()
        result.extraModes = result.extra.compactMap { byTime[$0]?.mode }
        return result
    }

    static func run(log: String) throws -> Comparison {
        let bytes = try TestSupport.fixture(log)
        let chk = try TestSupport.fixture(log + ".chk")
        let ours = TestSupport.decode(bytes).positions
        return compare(ours: ours, gpsd: epochs(chk: chk))
    }
}

@Suite struct GpsdComparisonTests {
    @Test(arguments: TestSupport.gpsdLogs)
    func eachLogMatchesGpsdEpochs(log: String) throws {
        let r = try GpsdChk.run(log: log)
        let sortedMismatches = r.mismatches.sorted { $0.key < $1.key }
        var report = "\(log): \(r.matched)/\(r.total) epochs match, \(r.extra.count) extra"
        for (t, why) in sortedMismatches.prefix(8) {
            report += "\n  \(Timestamp(milliseconds: t)) \(why)"
        }
        for t in r.extra.prefix(4) { report += "\n  extra \(Timestamp(milliseconds: t))" }
        report += "\n  extra modes \(r.extraModes.map(\.rawValue))"
        print(report)
        #expect(r.mismatches.isEmpty, "\(report)")
    }
}
