import GatewayCore

/// One epoch as gpsd reported it in a regression `.chk` file: the last TPV with a given time.
public struct GpsdEpoch: Sendable {
    public var time: Int64
    public var mode: Int
    public var lat: Double?
    public var lon: Double?
    public var altMSL: Double?
    public var speed: Double?
    public var track: Double?
}

/// How positions compare with gpsd's epochs, by the rules of the shared data README.
public struct GpsdComparison: Sendable {
    public var total = 0
    public var matched = 0
    /// gpsd epoch time (ms) → what differed ("missing" when we have no position for it).
    public var mismatches: [Int64: String] = [:]
    /// Our timed positions gpsd did not report, by time, with their modes.
    public var extra: [Int64] = []
    public var extraModes: [FixMode] = []
    /// Ids of our positions without a time, and times we produced twice.
    public var untimed: [String] = []
    public var duplicateTimes: [Int64] = []

    /// Every problem as one line each, in gpsd's epoch order (extras are not problems).
    public func problems(order: [GpsdEpoch]) -> [String] {
        untimed.map { "position without time: \($0)" }
            + duplicateTimes.map { "two positions for \(Timestamp(milliseconds: $0))" }
            + order.compactMap { e in mismatches[e.time].map { "\(Timestamp(milliseconds: e.time)): \($0)" } }
    }
}

/// gpsd's regression `.chk` files: NMEA input lines (LF) interleaved with gpsd's JSON reports.
public enum GpsdCheckFile {
    /// gpsd's week-rollover heuristic can move a date by exactly 1024 weeks.
    public static let rolloverMs: Int64 = 619_315_200_000

    /// The JSON report lines (gpsd's output; the other lines are its NMEA input).
    public static func jsonLines(_ chk: [UInt8]) -> [[UInt8]] {
        // Split bytes, not Characters: "\r\n" is a single Character in Swift.
        chk.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }).filter { $0.first == UInt8(ascii: "{") }.map(Array.init)
    }

    /// Steps 1–2: TPVs with a time, the last one per time, in order of first appearance.
    public static func epochs(chk: [UInt8]) -> [GpsdEpoch] {
        var byTime: [Int64: GpsdEpoch] = [:]
        var order: [Int64] = []
        for line in jsonLines(chk) {
            guard let object = try? JSONValue.parse(line), object["class"] == .string("TPV"),
                  let text = object["time"]?.stringValue, let time = Timestamp(iso8601: text) else { continue }
            let e = GpsdEpoch(
                time: time.milliseconds, mode: Int(object["mode"]?.numberValue ?? 0),
                lat: object["lat"]?.numberValue, lon: object["lon"]?.numberValue,
                altMSL: object["altMSL"]?.numberValue, speed: object["speed"]?.numberValue,
                track: object["track"]?.numberValue)
            if byTime[e.time] == nil { order.append(e.time) }
            byTime[e.time] = e
        }
        return order.compactMap { byTime[$0] }
    }

    /// Steps 3–5: mode exactly, time to the ms (or exactly 1024 weeks apart), lat/lon 1e-6°,
    /// altMSL 1e-3 m, speed 1e-3 m/s, track 1e-3°, when present on both sides; with
    /// `strictPresence` a value present on one side only is a difference too.
    public static func compare(ours: [Position], gpsd: [GpsdEpoch], strictPresence: Bool = false) -> GpsdComparison {
        var result = GpsdComparison()
        var byTime: [Int64: Position] = [:]
        for p in ours {
            guard let t = p.time?.milliseconds else { result.untimed.append(p.id); continue }
            if byTime[t] != nil { result.duplicateTimes.append(t) }
            byTime[t] = p
        }
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
                if strictPresence, (a == nil) != (b == nil) {
                    diffs.append("\(name) \(a.map { "\($0)" } ?? "absent")≠\(b.map { "\($0)" } ?? "absent")")
                }
            }
            check("lat", p.latitude, e.lat, 1e-6)
            check("lon", p.longitude, e.lon, 1e-6)
            check("altMSL", p.altitude, e.altMSL, 1e-3)
            check("speed", p.speed, e.speed, 1e-3)
            check("track", p.course, e.track, 1e-3)
            if diffs.isEmpty { result.matched += 1 } else { result.mismatches[e.time] = diffs.joined(separator: ", ") }
        }
        result.extra = byTime.keys.filter { !used.contains($0) }.sorted()
        result.extraModes = result.extra.compactMap { byTime[$0]?.mode }
        return result
    }
}
