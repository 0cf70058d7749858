import PluginCatalog
import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
import MapRendering
import TrackMap

/// A receiver log from gpsd's regression suite (Tests/NMEATests/Fixtures/gpsd).
func gpsdFixture(_ name: String) -> String {
    LocgateBinary.packageRoot.appendingPathComponent("Tests/NMEATests/Fixtures/gpsd/\(name)").path
}

/// A boat on the IJsselmeer: 149 fixes over 150 s, about 450 m south-west to north-east.
let boatLog = gpsdFixture("bundg_zeus_9.log")
/// Five fixes in Shanghai, where the GCJ-02 and BD-09 shifts both apply.
let shanghaiLog = gpsdFixture("beidou-bd.log")

/// A GeoJSON FeatureCollection of rectangles (`[south, west, north, east]`) and circles.
func fenceCollection(rectangles: [(id: String, box: [Double])] = [], circles: [(id: String, lat: Double, lon: Double, radius: Double)] = []) -> String {
    var features: [String] = []
    for r in rectangles {
        let (s, w, n, e) = (r.box[0], r.box[1], r.box[2], r.box[3])
        features.append(#"{"type":"Feature","properties":{"id":"\#(r.id)"},"geometry":{"type":"Polygon","coordinates":[[[\#(w),\#(s)],[\#(e),\#(s)],[\#(e),\#(n)],[\#(w),\#(n)],[\#(w),\#(s)]]]}}"#)
    }
    for c in circles {
        features.append(#"{"type":"Feature","properties":{"id":"\#(c.id)","radius":\#(c.radius)},"geometry":{"type":"Point","coordinates":[\#(c.lon),\#(c.lat)]}}"#)
    }
    return #"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#
}

/// The same rectangle with each corner converted from WGS84 into `datum`, as a fence drawn on that datum's map would be.
func convertedRectangle(id: String, box: [Double], to datum: ChinaDatums.Datum) -> String {
    let corners = [(box[0], box[1]), (box[0], box[3]), (box[2], box[3]), (box[2], box[1]), (box[0], box[1])].map {
        ChinaDatums.convert(GeoPoint(latitude: $0.0, longitude: $0.1), from: .wgs84, to: datum)
    }
    let ring = corners.map { "[\($0.longitude),\($0.latitude)]" }.joined(separator: ",")
    return #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"\#(id)"},"geometry":{"type":"Polygon","coordinates":[[\#(ring)]]}}]}"#
}

/// Writes `text` to `name` in a new temporary directory and returns the path.
func writeTemporary(_ name: String, _ text: String, in directory: String) throws -> String {
    let path = directory + "/" + name
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// Runs `locgate map` in-process and returns the page (Leaflet from Debian's libjs-leaflet).
func mapPage(_ arguments: [String]) async throws -> String {
    try await MapCommand.page(arguments, registry: BuiltinPlugins.registry, logger: Logger(label: "map", handler: SilentLogHandler()))
}

/// The map data JSON embedded in a page.
func embeddedData(_ html: String) throws -> JSONValue {
    let open = #"<script type="application/json" id="locgate-map-data">"#
    guard let start = html.range(of: open), let end = html.range(of: "</script>", range: start.upperBound..<html.endIndex) else {
        throw TestFailure("no map data in the page")
    }
    return try JSONValue.parse(string: String(html[start.upperBound..<end.lowerBound]))
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `[lat, lon]` pairs of a JSON array of points.
func points(_ value: JSONValue?) -> [(Double, Double)] {
    (value?.arrayValue ?? []).compactMap { p in
        guard let a = p.arrayValue, a.count == 2, let lat = a[0].numberValue, let lon = a[1].numberValue else { return nil }
        return (lat, lon)
    }
}

/// Debian's chromium, when installed (`make test` installs it).
let chromiumPath: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
