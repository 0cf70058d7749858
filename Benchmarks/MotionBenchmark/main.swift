// Nanoseconds per position through the motion transform, in batches as a source emits them:
// for looking at the transform's cost on its own. The ratio that counts (the replay with motion
// against the replay without it, whole processes) is Benchmarks/motion_replay.py's.
//
// The track is the replay corpus's kind of drive (gen_nmea_corpus.py): one device, a fix a
// second, the speed redrawn every second between 0 and 30 knots, the heading wandering.
import Foundation
import GatewayCore
import Motion

/// A value in 0..<1 that looks random and is the same on every run and machine.
func noise(_ i: Int, _ salt: Double) -> Double {
    let x = sin(Double(i) * 12.9898 + salt) * 43_758.5453
    return x - x.rounded(.down)
}

func drive(_ count: Int) -> [Position] {
    var lat = 31.2304, lon = 121.4737, heading = 45.0
    var out: [Position] = []
    out.reserveCapacity(count)
    for i in 0..<count {
        heading += noise(i, 1) * 10 - 5
        let speed = noise(i, 2) * 30 * 0.514444
        lat += speed * cos(heading * .pi / 180) / 111_320
        lon += speed * sin(heading * .pi / 180) / (111_320 * cos(lat * .pi / 180))
        var p = Position(time: Timestamp(milliseconds: 1_714_521_600_000 + Int64(i) * 1000), latitude: lat, longitude: lon,
                         speed: speed, mode: .threeD, source: "corpus", device: "van-7")
        p.identifier = PositionID(prefix: "corpus-", number: 1_714_521_600_000 + Int64(i) * 1000)
        out.append(p)
    }
    return out
}

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 200_000 : 200_000
let positions = drive(count)
let batches = stride(from: 0, to: positions.count, by: 64).map { Array(positions[$0..<min($0 + 64, positions.count)]) }
for (name, json) in [("defaults", "{}"), ("all kinds", #"{"speed_limit_kmh": 40, "min_stop_duration": "20s", "min_trip_duration": "20s", "overspeed_min_duration": "0s"}"#)] {
    guard case .object(let object) = try JSONValue.parse(string: json) else { fatalError() }
    let diagnostics = ConfigurationDiagnostics()
    var reader = OptionReader(object: object, path: "transforms.motion", diagnostics: diagnostics)
    let configuration = MotionPlugin.configure(&reader)
    var best = Double.infinity
    var events = 0
    for _ in 0..<5 {
        var t = MotionTransform(configuration: configuration, context: ComponentContext(id: "motion", kind: .transform,
                                                                                        logger: Logger(label: "bench", handler: SilentLogHandler()), stats: ComponentStats(id: "motion")))
        var work = batches
        let start = ContinuousClock.now
        for i in work.indices { t.process(batch: &work[i]) }
        let elapsed = ContinuousClock.now - start
        best = min(best, Double(elapsed.components.attoseconds) / 1e9 + Double(elapsed.components.seconds) * 1e9)
        events = work.reduce(0) { $0 + $1.count } - positions.count
    }
    print("\(name): \(String(format: "%.0f", best / Double(count))) ns per position (best of 5, \(count) positions in batches of 64, \(events) events)")
}
