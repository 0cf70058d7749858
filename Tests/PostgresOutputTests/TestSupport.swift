import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import PostgresOutput
import PluginCatalog
import Testing

/// The postgres sink under test, in this process (its tests name it `db`: `sinks.db` in messages).
typealias Harness = SinkHarness<PostgresSinkPlugin>

/// `{"type": "postgres", …}` for `server`'s database `database`, a queue file in `directory` (or
/// null), and `extra` members.
func sinkJSON(_ server: PostgresServer, database: String, queue: String?, extra: String = "") -> String {
    let q = queue.map { #"{ "path": "\#($0)" }"# } ?? "null"
    return #"{ "type": "postgres", "url": "\#(server.url(database: database))", "batch": { "max_positions": 100, "interval": "50ms" }, "retry": { "initial": "50ms", "max": "500ms" }, "queue": \#(q)\#(extra.isEmpty ? "" : ", " + extra) }"#
}

/// Integers from the first column of psql's output.
func numbers(_ text: String) -> [Int] { text.split(separator: "\n").compactMap { Int($0) } }

/// A transform built from JSON options through the built-in registry, as a pipeline builds it.
func makeTransform(_ type: String, _ json: String) throws -> any PositionTransform {
    let plugin = try #require(BuiltinPlugins.registry.plugin(kind: .transform, type: type))
    let object = try #require(try JSONValue.parse(string: json).objectValue)
    let diagnostics = ConfigurationDiagnostics()
    var reader = OptionReader(object: object, path: "transforms.t", diagnostics: diagnostics)
    reader.markKnown(PipelineConfiguration.commonKeys)
    let prepared = plugin.prepare(&reader)
    reader.finish()
    #expect(diagnostics.problems.isEmpty, "\(diagnostics.problems)")
    let context = ComponentContext(id: "t", kind: .transform, logger: Logger(label: "transforms.t", handler: RecordingLogHandler()), stats: ComponentStats(id: "t"))
    guard case .transform(let t) = try prepared.build(context) else { throw PostgresServerError(description: "\(type) is not a transform") }
    return t
}

/// Rows of a queue file's table, counted with the sqlite3 tool.
func queueRows(_ path: String, _ table: String = "pending") -> Int {
    let out = (try? Program.run("/usr/bin/env", ["sqlite3", path, "SELECT count(*) FROM \(table)"]))?.stdout ?? ""
    return Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

/// The sink's tables, created as the sink creates them, in `database` (for tests that change them first).
func createTables(_ server: PostgresServer, database: String, _ tables: PostgresTables = PostgresTables()) throws {
    for role in TableRole.allCases {
        try server.psql(PostgresSchema.createStatements(role, tables).joined(separator: ";\n"), database: database)
    }
}

/// Distance in metres between two WGS84 points (haversine on a 6,371,008.8 m sphere).
func metres(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
    let r = 6_371_008.8, rad = Double.pi / 180
    let dLat = (lat2 - lat1) * rad, dLon = (lon2 - lon1) * rad
    let a = sin(dLat / 2) * sin(dLat / 2) + cos(lat1 * rad) * cos(lat2 * rad) * sin(dLon / 2) * sin(dLon / 2)
    return 2 * r * asin(min(1, a.squareRoot()))
}
