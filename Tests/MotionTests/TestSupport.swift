import Foundation
import GatewayCore
import GatewayTesting
@testable import Motion

/// Synthetic tracks with known answers: a device parked, driving straight legs at a set speed,
/// silent for a while, with the ignition and speeds the test asks for; one fix a second unless
/// told otherwise. Places are metres east and north of a fixed origin.
struct Track {
    static let origin = (latitude: 52.37, longitude: 4.89)
    static let epoch: Int64 = 1_767_225_600_000   // 2026-01-01T00:00:00Z

    var device = "car"
    /// Seconds since ``epoch`` of the last fix.
    var t = 0.0
    var east = 0.0
    var north = 0.0
    var ignition: Bool?
    var positions: [Position] = []
    var rng = SeededGenerator(seed: 46)

    init(device: String = "car", seed: UInt64 = 46) {
        self.device = device
        rng = SeededGenerator(seed: seed)
    }

    /// Metres to degrees near the origin (a local plane: the transform's own distances are
    /// checked against the legs' lengths, to well under 0.1 %).
    static func place(east: Double, north: Double) -> (latitude: Double, longitude: Double) {
        let scale = metresPerDegree
        return (origin.latitude + north / scale.latitude, origin.longitude + east / scale.longitude)
    }

    static let metresPerDegree: (latitude: Double, longitude: Double) = {
        // WGS84 radii of curvature at the origin's latitude, as the transform uses them.
        let a = 6_378_137.0, f = 1 / 298.257223563, e2 = f * (2 - f)
        let phi = origin.latitude * .pi / 180, s = sin(phi)
        let w2 = 1 - e2 * s * s, w = w2.squareRoot()
        return (a * (1 - e2) / (w2 * w) * .pi / 180, a / w * cos(phi) * .pi / 180)
    }()

    /// One fix `dt` seconds after the last, at the current place plus an offset.
    mutating func fix(after dt: Double = 1, speed: Double?, offset: (east: Double, north: Double) = (0, 0), attributes: [String: String] = [:]) {
        t += dt
        let p = Self.place(east: east + offset.east, north: north + offset.north)
        var a = attributes
        if let ignition { a["ignition"] = ignition ? "true" : "false" }
        positions.append(Position(time: Timestamp(milliseconds: Self.epoch + Int64((t * 1000).rounded())), latitude: p.latitude, longitude: p.longitude,
                                  speed: speed, mode: .threeD, source: "rx", device: device, id: "\(device)-\(positions.count)", attributes: a))
    }

    /// Parked for `seconds`, one fix every `every` seconds, scattered up to `drift` metres each
    /// way, reporting speeds up to `speedNoise` m/s (nil: no speed reported).
    mutating func park(_ seconds: Double, every: Double = 1, drift: Double = 0, speedNoise: Double? = 0) {
        for _ in 0..<Int((seconds / every).rounded()) {
            let offset = drift > 0 ? (Double.random(in: -drift...drift, using: &rng), Double.random(in: -drift...drift, using: &rng)) : (0.0, 0.0)
            let v = speedNoise.map { $0 > 0 ? Double.random(in: 0...$0, using: &rng) : 0 }
            fix(after: every, speed: v, offset: offset)
        }
    }

    /// A straight leg of `metres` at `speed` m/s towards `heading` degrees (0 north, 90 east),
    /// one fix every `every` seconds, the last one exactly at the end.
    mutating func drive(_ metres: Double, speed: Double, heading: Double = 90, every: Double = 1, reportSpeed: Bool = true) {
        let steps = Int((metres / (speed * every)).rounded(.up))
        let stepLength = metres / Double(steps)
        for _ in 0..<steps {
            east += stepLength * sin(heading * .pi / 180)
            north += stepLength * cos(heading * .pi / 180)
            fix(after: stepLength / speed, speed: reportSpeed ? speed : nil)
        }
    }

    /// Speeds held for a while without caring where: `(seconds, m/s)` runs along a straight road.
    mutating func cruise(_ runs: [(seconds: Int, speed: Double)]) {
        for run in runs {
            for _ in 0..<run.seconds {
                east += run.speed
                fix(speed: run.speed)
            }
        }
    }

    /// No fix for `seconds` (the next fix comes that long after the last).
    mutating func silence(_ seconds: Double) {
        t += seconds - 1
    }
}

/// Building and running motion transforms.
enum Motion {
    static func configuration(_ json: String = "{}") throws -> MotionConfiguration {
        try PluginOptions.valid(MotionPlugin.self, json)
    }

    static func transform(_ json: String = "{}", stats: ComponentStats = ComponentStats(id: "motion")) throws -> MotionTransform {
        let c = try configuration(json)
        return MotionTransform(configuration: c, context: ComponentContext(id: "motion", kind: .transform,
                                                                           logger: Logger(label: "test", handler: SilentLogHandler()), stats: stats))
    }

    /// Everything the transform emits for `positions`, one at a time.
    static func run(_ json: String = "{}", _ positions: [Position], stats: ComponentStats = ComponentStats(id: "motion")) throws -> [Position] {
        var t = try transform(json, stats: stats)
        var out: [Position] = []
        for p in positions { t.process(p, into: &out) }
        return out
    }

    /// The events among `output`.
    static func events(_ output: [Position]) -> [Position] {
        output.filter { $0.event != nil }
    }

    /// `kind@seconds` of each event (seconds since the track's epoch).
    static func summary(_ output: [Position]) -> [String] {
        events(output).map { "\($0.event!.kind.rawValue)@\(seconds($0.time))" }
    }

    static func seconds(_ t: Timestamp?) -> Double {
        Double((t?.milliseconds ?? 0) - Track.epoch) / 1000
    }

    static func kinds(_ output: [Position]) -> [PositionEvent.Kind] {
        events(output).compactMap(\.event?.kind)
    }

    /// A number attribute of an event.
    static func number(_ p: Position, _ key: String) -> Double? {
        p.attributes[key].flatMap(Double.init)
    }
}

/// Delivery with some fixes late, in time: `share` of the fixes (never the first `keep`) each
/// arrive `delay` seconds after their own time, behind every fix whose time is before that;
/// the rest arrive at their time. A fix delayed into a silence arrives before the fix after it,
/// so it is not late at all, as on a real link.
enum LateArrival {
    static func deliver(_ track: [Position], share: Double, delay: ClosedRange<Double>, keep: Int = 20, seed: UInt64) -> (delivery: [Position], late: Set<String>) {
        var rng = SeededGenerator(seed: seed)
        let candidates = Array(keep..<track.count)
        let moved = Set(candidates.shuffled(using: &rng).prefix(Int((Double(track.count) * share).rounded())))
        var arrivals: [(at: Int64, index: Int)] = []
        for (i, p) in track.enumerated() {
            let t = p.time?.milliseconds ?? 0
            arrivals.append((moved.contains(i) ? t + Int64(Double.random(in: delay, using: &rng) * 1000) : t, i))
        }
        arrivals.sort { ($0.at, $0.index) < ($1.at, $1.index) }
        let delivery = arrivals.map { track[$0.index] }
        // Late: arrived after a fix newer than itself.
        var newest = Int64.min
        var late: Set<String> = []
        for p in delivery {
            let t = p.time?.milliseconds ?? 0
            if t < newest { late.insert(p.id) } else { newest = t }
        }
        return (delivery, late)
    }
}
