// Points per second of the `coordinates` conversions over the same million points in China,
// beside PROJ's `cs2cs` (WGS84 → EPSG:32650) on those points in the same run.
// Run through Benchmarks/coordinates.sh (release build). Usage: CoordinatesBenchmark [points]

import Coordinates
import Foundation
import GatewayCore
import Geodesy

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 1_000_000 : 1_000_000

// Deterministic points over mainland China (a fixed LCG, so every run converts the same points).
struct LCG {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    mutating func next() -> Double {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Double(state >> 11) / Double(1 << 53)
    }
}
let points: [GeoPoint] = {
    var random = LCG()
    return (0..<count).map { _ in GeoPoint(latitude: 18 + random.next() * 35.5, longitude: 73.5 + random.next() * 61.5) }
}()

struct BenchmarkError: Error { let message: String }

func seconds(_ d: Duration) -> Double { d.secondsDouble }

/// Times `body` over all points; returns points/s and a checksum so the work is not optimised away.
func measure(_ body: (GeoPoint) -> GeoPoint) -> (rate: Double, check: Double) {
    var sum = 0.0
    let clock = ContinuousClock()
    let elapsed = clock.measure {
        for p in points {
            let q = body(p)
            sum += q.latitude + q.longitude
        }
    }
    return (Double(points.count) / seconds(elapsed), sum)
}

/// Times the plugin itself: Positions through `CoordinatesTransform.process`.
func measureTransform(_ options: String, datum: Datum) throws -> Double {
    guard case .object(let object) = try JSONValue.parse(string: options) else { return 0 }
    let diagnostics = ConfigurationDiagnostics()
    var reader = OptionReader(object: object, path: "bench", diagnostics: diagnostics)
    let configuration = CoordinatesPlugin.configure(&reader)
    let context = ComponentContext(id: "bench", kind: .transform, logger: Logger(label: "bench", handler: SilentLogHandler()), stats: ComponentStats(id: "bench"))
    var transform = try CoordinatesTransform(configuration: configuration, context: context)
    let positions = points.map { Position(latitude: $0.latitude, longitude: $0.longitude, mode: .threeD, datum: datum, source: "bench") }
    var out: [Position] = []
    out.reserveCapacity(positions.count)
    let elapsed = ContinuousClock().measure {
        for p in positions { transform.process(p, into: &out) }
    }
    precondition(out.count == positions.count, "the transform dropped positions")
    return Double(positions.count) / seconds(elapsed)
}

/// Runs `cs2cs -f %.6f EPSG:4326 EPSG:32650` over the points (lat lon text, its axis order).
func measureCs2cs() throws -> Double {
    let input = FileManager.default.temporaryDirectory.appendingPathComponent("locgate-bench-\(getpid()).txt")
    var text = ""
    text.reserveCapacity(points.count * 24)
    for p in points { text += "\(p.latitude) \(p.longitude)\n" }
    try Data(text.utf8).write(to: input)
    defer { try? FileManager.default.removeItem(at: input) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/cs2cs")
    process.arguments = ["-f", "%.6f", "EPSG:4326", "EPSG:32650"]
    process.standardInput = try FileHandle(forReadingFrom: input)
    process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
    let elapsed = try ContinuousClock().measure {
        try process.run()
        process.waitUntilExit()
    }
    guard process.terminationStatus == 0 else { throw BenchmarkError(message: "cs2cs exited with \(process.terminationStatus)") }
    return Double(points.count) / seconds(elapsed)
}

let projector = try ProjTransformer(source: "EPSG:4326", target: "EPSG:32650")
let cs2cs = try measureCs2cs()

let rows: [(String, (rate: Double, check: Double), Double)] = [
    ("wgs84 → gcj02", measure { ChinaDatums.wgs84ToGCJ02($0) }, try measureTransform(#"{"to": "gcj02"}"#, datum: .wgs84)),
    ("wgs84 → bd09", measure { ChinaDatums.wgs84ToBD09($0) }, try measureTransform(#"{"to": "bd09"}"#, datum: .wgs84)),
    ("gcj02 → wgs84 (iterative)", measure { ChinaDatums.gcj02ToWGS84($0) }, try measureTransform(#"{"to": "wgs84"}"#, datum: .gcj02)),
    ("wgs84 → EPSG:32650 (PROJ)", measure { p in
        let xy = (try? projector.forward(longitude: p.longitude, latitude: p.latitude)) ?? (x: 0, y: 0)
        return GeoPoint(latitude: xy.y, longitude: xy.x)
    }, try measureTransform(#"{"to": "EPSG:32650"}"#, datum: .wgs84)),
]

func format(_ rate: Double) -> String { String(format: "%12.0f", rate) }
say("coordinates benchmark: \(count) points in China (18–53.5 N, 73.5–135 E)")
say("conversion                    function pts/s   plugin pts/s   function/cs2cs   plugin/cs2cs")
for (name, f, plugin) in rows {
    say(name.padding(toLength: 28, withPad: " ", startingAt: 0) + "  " + format(f.rate) + "   " + format(plugin)
        + String(format: "   %12.1fx   %12.1fx", f.rate / cs2cs, plugin / cs2cs))
}
say("cs2cs EPSG:4326 → EPSG:32650  " + format(cs2cs) + "   (process incl. text parsing and printing)")
say("checksum \(rows.map(\.1.check).reduce(0, +))")
