// The `geofence` transform's fence file: GeoJSON text, whole, parsed, loaded by FenceLoader
// (Polygon, MultiPolygon, Point with a radius), indexed (FenceSet's R-tree) and queried the way
// the transform queries it for a position.
//
// Checks: the index never misses a fence that contains a point (it may offer extra candidates,
// never fewer); distances to a boundary are not negative.
import FuzzSupport
import GatewayCore
import Geodesy
import Geofence

/// Points every document is probed at, besides each fence's own box corners and centre.
let fixedProbes = [
    GeoPoint(latitude: 0, longitude: 0), GeoPoint(latitude: 46.05, longitude: 14.5),
    GeoPoint(latitude: 89.99, longitude: 179.99), GeoPoint(latitude: -90, longitude: -180),
    GeoPoint(latitude: 10, longitude: 180), GeoPoint(latitude: -33.9, longitude: 151.2),
]

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let document = try? JSONValue.parse(fuzzInput(data, size)) else { return 0 }
    let fences: [Fence]
    do throws(FenceLoadError) {
        fences = try FenceLoader(idProperty: "id", nameProperty: "name").load(document)
    } catch {
        _ = error.description
        return 0
    }
    let set = FenceSet(fences)
    fuzzCheck(set.offsetById.count == fences.count, "fences: \(fences.count) fences, \(set.offsetById.count) ids")
    // Enough fences to reach every branch of the index; each probe tests each of them.
    let tested = fences.prefix(64)
    var probes = fixedProbes
    for fence in tested {
        let box = fence.shape.box
        let corners = [
            GeoPoint(latitude: box.minLatitude, longitude: box.minLongitude),
            GeoPoint(latitude: box.maxLatitude, longitude: box.maxLongitude),
            GeoPoint(latitude: (box.minLatitude + box.maxLatitude) / 2, longitude: (box.minLongitude + box.maxLongitude) / 2),
        ]
        probes += corners.map(\.normalized)
    }
    for (k, point) in probes.enumerated() {
        let candidates = Set(set.index.candidates(containing: point))
        for (offset, fence) in tested.enumerated() {
            if fence.shape.contains(point) {
                fuzzCheck(candidates.contains(offset), "fences: the index misses fence \(fence.id) at \(point)")
            }
            let distance = fence.shape.distanceToBoundary(from: point)
            fuzzCheck(!(distance < 0), "fences: distance \(distance) from \(point) to fence \(fence.id)")
            _ = fence.shape.signedDistanceToBoundary(from: point)
            if k > 0 { _ = fence.shape.segmentIntersects(from: probes[k - 1], to: point) }
        }
    }
    return 0
}

FuzzDriver.run(testOneInput)
