import Foundation
import GatewayCore
import Geodesy
import Locking
import Testing
@testable import Coordinates

/// Records log lines so tests can count warnings.
final class RecordingLogHandler: LogHandler, Sendable {
    let lines = Locked<[(LogLevel, String)]>([])
    var minimumLevel: LogLevel { .trace }
    func log(level: LogLevel, label: String, message: String) { lines.withLock { $0.append((level, message)) } }
    var warnings: [String] { lines.withLock { $0.filter { $0.0 == .warning }.map(\.1) } }
}

func makeTransform(_ json: String) throws -> (CoordinatesTransform, ComponentStats, RecordingLogHandler) {
    let (c, problems) = try configure(json)
    #expect(problems.isEmpty, "\(problems)")
    let stats = ComponentStats(id: "c")
    let log = RecordingLogHandler()
    let ctx = ComponentContext(id: "c", kind: .transform, logger: Logger(label: "transforms.c", handler: log), stats: stats)
    return (try CoordinatesTransform(configuration: c, context: ctx), stats, log)
}

func configure(_ json: String) throws -> (CoordinatesConfiguration, [String]) {
    guard case .object(let object) = try JSONValue.parse(string: json) else { throw CancellationError() }
    let diagnostics = ConfigurationDiagnostics()
    var reader = OptionReader(object: object, path: "transforms.c", diagnostics: diagnostics)
    reader.markKnown(["type", "inputs"])
    let c = CoordinatesPlugin.configure(&reader)
    reader.finish()
    return (c, diagnostics.problems.map(\.description))
}

func position(lon: Double, lat: Double, datum: Datum = .wgs84, source: String = "rx") -> Position {
    Position(latitude: lat, longitude: lon, mode: .threeD, datum: datum, source: source, id: "\(lon),\(lat)")
}

func convert(_ t: inout CoordinatesTransform, _ p: Position) -> Position? {
    var out: [Position] = []
    t.process(p, into: &out)
    return out.first
}

/// Ground distance in metres between two lon/lat pairs.
func metres(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
    Geodesic.distance(from: GeoPoint(latitude: a.1, longitude: a.0), to: GeoPoint(latitude: b.1, longitude: b.0))
}

@Suite(.timeLimit(.minutes(3))) struct ProjectionTests {
    /// Points inside UTM zone 50N's useful area and across the world for Web Mercator.
    static let utmPoints: [(lon: Double, lat: Double)] = [(116.4, 39.9), (114.0579, 22.5431), (117.2, 31.8), (119.3, 26.08), (120.0, 0.5), (113.1, 55.0), (117.0, 84.0)]
    static let mercatorPoints: [(lon: Double, lat: Double)] = [(116.4, 39.9), (0, 0), (-122.4194, 37.7749), (151.2093, -33.8688), (-179.9, 84.9), (2.3522, 48.8566)]

    /// Runs the real `cs2cs` on lat/lon lines (EPSG:4326's axis order) and returns easting/northing.
    func cs2cs(_ target: String, _ points: [(lon: Double, lat: Double)]) throws -> [(Double, Double)] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/cs2cs")
        process.arguments = ["-f", "%.6f", "EPSG:4326", target]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let text = points.map { "\($0.lat) \($0.lon)\n" }.joined()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { Double($0) }
            return (f.count > 0 ? f[0] : .nan, f.count > 1 ? f[1] : .nan)
        }
    }

    @Test(arguments: [("EPSG:32650", utmPoints), ("EPSG:3857", mercatorPoints)])
    func projectionEqualsCs2cs(_ target: String, _ points: [(lon: Double, lat: Double)]) throws {
        let expected = try cs2cs(target, points)
        try #require(expected.count == points.count)
        var (t, _, _) = try makeTransform(#"{"to": "\#(target)"}"#)
        for (i, p) in points.enumerated() {
            let out = try #require(convert(&t, position(lon: p.lon, lat: p.lat)))
            let x = try #require(out.x), y = try #require(out.y)
            // cs2cs prints 6 decimals: equal to the micrometre.
            #expect(abs(x - expected[i].0) <= 1e-6 && abs(y - expected[i].1) <= 1e-6, "\(p): \(x) \(y) vs cs2cs \(expected[i])")
            #expect(out.datum == Datum(name: target))
            // Latitude/longitude stay the geographic WGS84 input.
            #expect(out.latitude == p.lat && out.longitude == p.lon)
        }
    }

    @Test func projectingGCJ02InputConvertsToWGS84First() throws {
        var (t, _, _) = try makeTransform(#"{"from": "gcj02", "to": "EPSG:32650"}"#)
        let out = try #require(convert(&t, position(lon: 121.531541859215, lat: 31.17530398364597, datum: .gcj02)))
        let lon = try #require(out.longitude), lat = try #require(out.latitude)
        let x = try #require(out.x), y = try #require(out.y)
        #expect(metres((121.5272106, 31.1774276), (lon, lat)) < 0.01)
        let expected = try cs2cs("EPSG:32650", [(lon, lat)])
        #expect(abs(x - expected[0].0) <= 1e-6)
        #expect(abs(y - expected[0].1) <= 1e-6)
    }

    @Test func aPointOutsideTheProjectionIsDroppedAndCounted() throws {
        var (t, stats, log) = try makeTransform(#"{"to": "EPSG:3857"}"#)
        #expect(convert(&t, position(lon: 10, lat: 91)) == nil)
        let lines = log.lines.withLock { $0.map(\.1) }
        #expect(lines.contains { $0.contains("PROJ transform (10.0, 91.0): ") }, "\(lines)")
        #expect(stats.value("dropped.projection") == 1)
        #expect(stats.dropped == 1)
        // The operation is still usable after an error.
        #expect(convert(&t, position(lon: 0, lat: 0))?.x == 0)
    }

    @Test func anAlreadyProjectedPositionPassesUnchanged() throws {
        var (t, _, _) = try makeTransform(#"{"to": "EPSG:32650"}"#)
        let first = try #require(convert(&t, position(lon: 116.4, lat: 39.9)))
        #expect(convert(&t, first) == first)
    }

    @Test func unknownAndGeographicEPSGCodesAreConfigurationErrors() throws {
        let (_, unknown) = try configure(#"{"to": "EPSG:999999"}"#)
        #expect(unknown.count == 1 && unknown[0].hasPrefix("transforms.c.to: EPSG:999999 is not usable"))
        let (_, geographic) = try configure(#"{"to": "EPSG:4490"}"#)
        #expect(geographic.count == 1 && geographic[0].contains("is not a projected CRS"))
        let (_, badFrom) = try configure(#"{"from": "EPSG:32650", "to": "wgs84"}"#)
        #expect(badFrom == [#"transforms.c.from: expected "wgs84", "gcj02" or "bd09", got "EPSG:32650""#])
        let (_, missing) = try configure(#"{"china_bounds": "all"}"#)
        #expect(missing.contains("transforms.c.to: required option is missing"))
        #expect(missing.contains { $0.hasPrefix("transforms.c.china_bounds: expected one of") })
        let (_, typo) = try configure(#"{"to": "gcj2"}"#)
        #expect(typo == [#"transforms.c.to: expected "wgs84", "gcj02", "bd09" or "EPSG:<code>", got "gcj2"; did you mean "gcj02"?"#])
    }
}

@Suite(.timeLimit(.minutes(3))) struct ChinaDatumPathTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let from: String, to: String
        let input: (Double, Double), expected: (Double, Double)
        var testDescription: String { "\(from)→\(to) \(input)" }
    }

    /// From Tests/GeodesyTests/Fixtures/coords/coord_vectors.json (recomputed standard values).
    static let vectors: [Vector] = [
        Vector(from: "wgs84", to: "gcj02", input: (121.5272106, 31.1774276), expected: (121.531541859215, 31.17530398364597)),
        Vector(from: "wgs84", to: "gcj02", input: (113.912316, 22.543847), expected: (113.9171764808363, 22.540796131694766)),
        Vector(from: "wgs84", to: "bd09", input: (116.403988, 39.914266), expected: (116.41661560068297, 39.92196580126834)),
        Vector(from: "gcj02", to: "bd09", input: (116.404, 39.915), expected: (116.41036949371029, 39.92133699351021)),
        // The fixture's bd09_to_gcj02 value is the one-step inverse (~5 cm off); the exact
        // inverse of its gcj02_to_bd09 vector is the input of that vector.
        Vector(from: "bd09", to: "gcj02", input: (116.41036949371029, 39.92133699351021), expected: (116.404, 39.915)),
        // The iterative inverses: exact, not the one-step approximation (off by metres).
        Vector(from: "gcj02", to: "wgs84", input: (121.531541859215, 31.17530398364597), expected: (121.5272106, 31.1774276)),
        Vector(from: "bd09", to: "wgs84", input: (116.41661560068297, 39.92196580126834), expected: (116.403988, 39.914266)),
        Vector(from: "wgs84", to: "gcj02", input: (-104.9903, 39.7392), expected: (-104.9903, 39.7392)),
    ]

    @Test(arguments: vectors)
    func convertsThroughThePlugin(_ v: Vector) throws {
        var (t, _, _) = try makeTransform(#"{"from": "\#(v.from)", "to": "\#(v.to)"}"#)
        let datum = try #require(Datum(parsing: v.from))
        let out = try #require(convert(&t, position(lon: v.input.0, lat: v.input.1, datum: datum)))
        let got = (try #require(out.longitude), try #require(out.latitude))
        #expect(metres(got, v.expected) < 0.01, "\(got) vs \(v.expected)")
        #expect(out.datum.name == v.to)
        #expect(out.x == nil && out.y == nil)
    }

    @Test func chinaBoundsNoneShiftsEverywhere() throws {
        let paris = position(lon: 2.3522, lat: 48.8566)
        var (box, _, _) = try makeTransform(#"{"to": "gcj02"}"#)
        var (none, _, _) = try makeTransform(#"{"to": "gcj02", "china_bounds": "none"}"#)
        #expect(convert(&box, paris)?.longitude == 2.3522)
        #expect(convert(&none, paris)?.longitude != 2.3522)
    }

    @Test func positionsWithoutCoordinatesPassUnchanged() throws {
        var (t, stats, _) = try makeTransform(#"{"to": "bd09"}"#)
        let p = Position(mode: .noFix, source: "rx", id: "n")
        #expect(convert(&t, p) == p)
        #expect(stats.namedValues.isEmpty)
    }
}

@Suite(.timeLimit(.minutes(3))) struct UnexpectedDatumTests {
    @Test func isReportedOncePerSourceAndConvertedFromWhatThePositionSays() throws {
        var (t, stats, log) = try makeTransform(#"{"from": "wgs84", "to": "gcj02"}"#)
        let gcj = (121.531541859215, 31.17530398364597)
        var outs: [Position] = []
        for source in ["a", "a", "b", "a"] {
            outs.append(try #require(convert(&t, position(lon: gcj.0, lat: gcj.1, datum: .gcj02, source: source))))
        }
        _ = convert(&t, position(lon: 121.5272106, lat: 31.1774276, source: "a"))
        #expect(log.warnings.count == 2)
        #expect(log.warnings.allSatisfy { $0.contains("is in gcj02, expected wgs84") })
        #expect(stats.value("unexpected_datum") == 4)
        // Already GCJ-02: converted from GCJ-02, i.e. unchanged — never shifted twice.
        for o in outs {
            #expect(o.longitude == gcj.0 && o.latitude == gcj.1 && o.datum == .gcj02)
        }
    }

    @Test func withoutFromEachPositionsOwnDatumIsUsedSilently() throws {
        var (t, stats, log) = try makeTransform(#"{"to": "wgs84"}"#)
        let out = try #require(convert(&t, position(lon: 116.41661560068297, lat: 39.92196580126834, datum: .bd09)))
        let lon = try #require(out.longitude), lat = try #require(out.latitude)
        #expect(metres((lon, lat), (116.403988, 39.914266)) < 0.01)
        #expect(log.warnings.isEmpty)
        #expect(stats.value("unexpected_datum") == 0)
    }

    @Test func anUnknownDatumIsDroppedAndReported() throws {
        var (t, stats, log) = try makeTransform(#"{"to": "gcj02"}"#)
        #expect(convert(&t, position(lon: 116, lat: 39, datum: Datum(name: "tokyo"))) == nil)
        #expect(stats.value("dropped.unknown_datum") == 1)
        #expect(stats.dropped == 1)
        #expect(log.warnings.count == 1)
    }
}

@Suite(.timeLimit(.minutes(3))) struct CoordinatesDocumentationTests {
    @Test func readmeTableMatchesTheOptions() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Plugins/Coordinates/README.md").standardized
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map(String.init)
        let start = try #require(lines.firstIndex { $0.hasPrefix("| option") })
        let names = lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map {
            $0.replacingOccurrences(of: "\\|", with: "/").split(separator: "|")[0].trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "`", with: "")
        }
        #expect(names == CoordinatesPlugin.info.options.map(\.name))
    }

    @Test func sampleIsValidAndReadsEveryOption() throws {
        guard case .object(let object) = try JSONValue.parse(string: CoordinatesPlugin.info.sample) else { Issue.record("not an object"); return }
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: "t", diagnostics: diagnostics)
        reader.markKnown(["type", "inputs"])
        _ = CoordinatesPlugin.configure(&reader)
        reader.finish()
        #expect(diagnostics.problems.isEmpty)
        #expect(Set(reader.askedKeys) == Set(CoordinatesPlugin.info.options.map(\.name)))
    }
}

@Suite struct OutsideChinaTests {
    @Test(arguments: [#"{"to": "gcj02"}"#, #"{"to": "bd09"}"#])
    func aPositionOutsideChinaIsCountedAndWarnedOncePerSource(_ json: String) throws {
        var (t, stats, log) = try makeTransform(json)
        let amsterdam = (4.8897, 52.3740)
        for source in ["a", "a", "b", "a"] {
            let out = try #require(convert(&t, position(lon: amsterdam.0, lat: amsterdam.1, source: source)))
            if json.contains("gcj02") { #expect(out.longitude == amsterdam.0 && out.latitude == amsterdam.1) }
        }
        // Inside China: shifted, not counted.
        _ = convert(&t, position(lon: 121.5272106, lat: 31.1774276, source: "a"))
        #expect(stats.value("coordinates.outside_china") == 4)
        #expect(log.warnings.count == 2, "\(log.warnings)")
        #expect(log.warnings.allSatisfy { $0.contains("is outside China (52.374, 4.8897): GCJ-02 leaves it unshifted") }, "\(log.warnings)")
    }

    @Test func withChinaBoundsNoneOrBetweenGCJ02AndBD09NothingIsCounted() throws {
        var (everywhere, s1, _) = try makeTransform(#"{"to": "gcj02", "china_bounds": "none"}"#)
        _ = convert(&everywhere, position(lon: 4.8897, lat: 52.3740))
        #expect(s1.value("coordinates.outside_china") == 0)
        // GCJ-02 → BD-09 applies everywhere: nothing is left unshifted.
        var (baidu, s2, log) = try makeTransform(#"{"to": "bd09"}"#)
        _ = convert(&baidu, position(lon: 4.8897, lat: 52.3740, datum: .gcj02))
        #expect(s2.value("coordinates.outside_china") == 0)
        #expect(log.warnings.isEmpty)
    }
}
