import Foundation
import Geodesy
import Testing

/// Loads the JSON fixtures copied from /work/shared/data/coords (see Fixtures/coords).
enum Fixtures {
    struct Missing: Error { let name: String }

    static func data(_ name: String) throws -> Data {
        guard let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures/coords") else {
            throw Missing(name: name)
        }
        return try Data(contentsOf: url)
    }

    struct VectorFile: Decodable { let vectors: [CoordVector] }

    static func coordVectors() throws -> [CoordVector] {
        try JSONDecoder().decode(VectorFile.self, from: data("coord_vectors")).vectors
    }

    struct City: Decodable, Sendable {
        struct Coords: Decodable, Sendable {
            let WGS84: [Double]
            let GCJ02: [Double]
            let BD09: [Double]
        }
        let coords: Coords
    }

    static func cities() throws -> [City] {
        try JSONDecoder().decode([City].self, from: data("gcoord-china-cities"))
    }

    struct Stat: Decodable { let n: Int; let mean_m: Double; let p99_m: Double; let max_m: Double }
    struct InverseAccuracy: Decodable {
        let approx_one_step: Stat
        let approx_plus_1_iter: Stat
        let approx_plus_2_iter: Stat
        let forward_offset_magnitude: Stat
    }

    static func inverseAccuracy() throws -> InverseAccuracy {
        try JSONDecoder().decode(InverseAccuracy.self, from: data("inverse_accuracy"))
    }
}

/// One published vector of coord_vectors.json (coordinates `[lon, lat]`).
struct CoordVector: Decodable, Sendable, CustomStringConvertible {
    let source: String
    let kind: String
    let input_lon_lat: [Double]
    let expected_lon_lat: [Double]
    let recomputed_standard_lon_lat: [Double]
    let recomputed_vs_expected_m: Double
    let note: String?

    var input: GeoPoint { point(input_lon_lat) }
    var expected: GeoPoint { point(expected_lon_lat) }
    var recomputed: GeoPoint { point(recomputed_standard_lon_lat) }
    var description: String { "\(source) \(kind) \(input_lon_lat)" }
}

/// A `[lon, lat]` pair as a point; NaN for a malformed pair so the comparison fails loudly.
func point(_ lonLat: [Double]) -> GeoPoint {
    lonLat.count >= 2 ? GeoPoint(latitude: lonLat[1], longitude: lonLat[0]) : GeoPoint(latitude: .nan, longitude: .nan)
}

/// Haversine distance in metres with an explicit radius (inverse_accuracy.json uses R = 6378137).
func metres(_ p: GeoPoint, _ q: GeoPoint, radius: Double = 6_378_137) -> Double {
    let k = Double.pi / 180
    let dLat = (q.latitude - p.latitude) * k, dLon = (q.longitude - p.longitude) * k
    let h = sin(dLat / 2) * sin(dLat / 2) + cos(p.latitude * k) * cos(q.latitude * k) * sin(dLon / 2) * sin(dLon / 2)
    return 2 * radius * asin(min(1, h.squareRoot()))
}

/// Largest coordinate difference in degrees.
func degrees(_ p: GeoPoint, _ q: GeoPoint) -> Double {
    max(abs(p.latitude - q.latitude), abs(p.longitude - q.longitude))
}

/// Records a measured number (accuracy maxima) with the test, without printing: the text is
/// attached to the test and saved when `swift test --attachments-path DIR` is given.
func report(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
    Attachment.record(text, named: "measured.txt", sourceLocation: sourceLocation)
}
