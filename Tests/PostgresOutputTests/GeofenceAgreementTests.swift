import Foundation
import GatewayCore
import GatewayTesting
@testable import PostgresOutput
import Testing

/// The fences loaded into PostGIS with `ST_GeomFromGeoJSON`: `ST_Contains` over the stored points
/// agrees with the geofence transform's annotation of every position, whatever datum the positions
/// were delivered in.
@Suite(.serialized) struct GeofenceAgreementTests {
    /// Three fences near Shanghai: a square, a concave "L", a square with a hole.
    static let fences: [(id: String, geometry: String)] = [
        ("square", #"{"type":"Polygon","coordinates":[[[121.40,31.10],[121.50,31.10],[121.50,31.20],[121.40,31.20],[121.40,31.10]]]}"#),
        ("ell", #"{"type":"Polygon","coordinates":[[[121.45,31.15],[121.60,31.15],[121.60,31.18],[121.48,31.18],[121.48,31.30],[121.45,31.30],[121.45,31.15]]]}"#),
        ("ring", #"{"type":"Polygon","coordinates":[[[121.52,31.22],[121.62,31.22],[121.62,31.30],[121.52,31.30],[121.52,31.22]],[[121.55,31.24],[121.59,31.24],[121.59,31.28],[121.55,31.28],[121.55,31.24]]]}"#),
    ]

    @Test(.timeLimit(.minutes(1)), arguments: ["wgs84", "gcj02", "bd09"])
    func postgisAgreesWithTheGeofenceAnnotationOfEveryPosition(datum: String) async throws {
        let server = try PostgresServer()
        try server.createDatabase("tracks")
        let features = Self.fences.map { #"{"type":"Feature","properties":{"id":"\#($0.id)"},"geometry":\#($0.geometry)}"# }.joined(separator: ",")
        var geofence = try makeTransform("geofence", #"{ "type": "geofence", "inputs": ["r"], "fences": {"type":"FeatureCollection","features":[\#(features)]}, "action": "annotate" }"#)
        var coordinates = try makeTransform("coordinates", #"{ "type": "coordinates", "inputs": ["g"], "to": "\#(datum)" }"#)
        var rng = SeededGenerator(seed: 2024)
        var batch = (0..<2000).map { i in
            Position(time: Timestamp(milliseconds: 1_714_557_600_000 + Int64(i) * 1000),
                     latitude: Double.random(in: 31.08...31.32, using: &rng), longitude: Double.random(in: 121.38...121.64, using: &rng),
                     mode: .threeD, source: "rx", device: "d\(i % 7)", id: "p-\(i)")
        }
        geofence.process(batch: &batch)
        if datum != "wgs84" { coordinates.process(batch: &batch) }
        #expect(batch.count == 2000 && batch.allSatisfy { $0.datum.name == datum })
        let inside = batch.filter { $0.attributes["fences"] != nil }.count
        #expect(inside > 400 && inside < 1600, "the points should fall both inside and outside: \(inside)")
        let harness = try Harness(sinkJSON(server, database: "tracks", queue: nil), id: "db")
        let positions = batch
        try await harness.run { buffer in await buffer.send(positions) }
        try server.psql("CREATE TABLE fences (ord int, id text, geom geometry(Polygon, 4326))", database: "tracks")
        for (i, f) in Self.fences.enumerated() {
            try server.psql("INSERT INTO fences VALUES (\(i), '\(f.id)', ST_SetSRID(ST_GeomFromGeoJSON('\(f.geometry)'), 4326))", database: "tracks")
        }
        let disagreements = try server.psql("""
            SELECT p.id, coalesce(p.attributes->>'fences', ''), coalesce(string_agg(f.id, ',' ORDER BY f.ord), '')
            FROM positions p LEFT JOIN fences f ON ST_Contains(f.geom, p.geom)
            GROUP BY p.id, p.attributes
            HAVING coalesce(p.attributes->>'fences', '') <> coalesce(string_agg(f.id, ',' ORDER BY f.ord), '')
            """, database: "tracks")
        #expect(disagreements.isEmpty, "\(disagreements.split(separator: "\n").prefix(10))")
        #expect(try server.psql("SELECT count(*) FROM positions", database: "tracks") == "2000")
    }
}
