// Per-device state as a store hands it back (settings.state: an SQLite row or a Key-Value value,
// both JSON written by a snapshot, or by anything that wrote to the file or the bucket): the text
// parsed, then restored into each stateful transform (geofence with events, distance_filter,
// throttle, dedupe, jump_filter).
//
// Checks: a snapshot restore accepted is stable (restored again from its own snapshot it gives
// the same snapshot), and the restored transform takes a position without crashing.
import Filters
import FuzzSupport
import GatewayCore
import Geofence

let context = ComponentContext(id: "fuzz", kind: .transform, logger: Logger(label: "fuzz", handler: SilentLogHandler()),
                               stats: ComponentStats(id: "transforms.fuzz"))

/// A geofence with events over one 200 m square fence `yard` (ids in snapshots name it).
func geofence() -> GeofenceTransform {
    let options = #"{"events":["enter","exit","dwell"],"loiter":"1m","min_inside":2,"min_outside":"10s","border_m":5,"fences":{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"yard"},"geometry":{"type":"Polygon","coordinates":[[[5.0,52.0],[5.003,52.0],[5.003,52.002],[5.0,52.002],[5.0,52.0]]]}}]}}"#
    guard case .object(let object) = try! JSONValue.parse(string: options) else { fatalError("geofence options") }
    var reader = OptionReader(object: object, path: "transforms.fuzz", diagnostics: ConfigurationDiagnostics())
    return try! GeofenceTransform(configuration: GeofencePlugin.configure(&reader), context: context)
}

let stats = ComponentStats(id: "transforms.fuzz")
nonisolated(unsafe) let makers: [() -> any StatefulTransform] = [
    geofence,
    { DistanceFilterTransform(configuration: DistanceFilterConfiguration(minDistance: 10, heartbeat: .seconds(30)), stats: stats) },
    { ThrottleTransform(configuration: ThrottleConfiguration(interval: .seconds(10)), stats: stats) },
    { DedupeTransform(stats: stats) },
    { JumpFilterTransform(configuration: JumpFilterConfiguration(), stats: stats) },
]

let probe = Position(time: Timestamp(milliseconds: 1_700_000_000_000), latitude: 52.001, longitude: 5.001, source: "fuzz", device: "d", id: "p")

func roundTrip<T: StatefulTransform>(_ make: () -> T, _ snapshot: JSONValue) {
    var t = make()
    do { try t.restore(device: "d", from: snapshot) } catch { _ = error.description; return }
    let first = t.snapshot(device: "d")
    if let first {
        var again = make()
        do { try again.restore(device: "d", from: first) } catch {
            fuzzCheck(false, "\(t.stateFormat): its own snapshot \(first.jsonText) is refused: \(error)")
        }
        let second = again.snapshot(device: "d")
        fuzzCheck(second == first, "\(t.stateFormat): snapshot \(first.jsonText) restored gives \(second?.jsonText ?? "nothing")")
    }
    var out: [Position] = []
    t.process(probe, into: &out)
    t.process(Position(source: "fuzz", device: "d", id: "q"), into: &out)
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let snapshot = try? JSONValue.parse(fuzzInput(data, size)) else { return 0 }
    for make in makers {
        func open<T: StatefulTransform>(_ t: T) { roundTrip({ make() as! T }, snapshot) }
        open(make())
    }
    return 0
}

FuzzDriver.run(testOneInput)
