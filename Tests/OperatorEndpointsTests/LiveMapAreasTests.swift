import PluginCatalog
import GatewayCore
import Geodesy
import MapRendering
@testable import OperatorEndpoints
import Testing

/// The live map draws the areas of any transform that offers them, not only the geofence
/// plugin's: here a third-party transform registered beside the built-in ones.
struct LiveMapAreasTests {
    /// A transform of someone else's making that keeps vehicles on a route: a corridor polygon
    /// drawn on an AMap (GCJ-02) and a depot circle in WGS84.
    enum CorridorPlugin: TransformPlugin {
        struct Configuration: Sendable {}
        static let info = PluginInfo(type: "corridor", kind: .transform, summary: "test", folder: "-", options: [],
                                     sample: #"{"type":"corridor","inputs":["gps"]}"#)
        static func configure(_ options: inout OptionReader) -> Configuration { Configuration() }
        struct Pass: PositionTransform {
            mutating func process(_ position: Position, into output: inout [Position]) { output.append(position) }
        }
        static func makeTransform(_ configuration: Configuration, context: ComponentContext) throws -> any PositionTransform { Pass() }

        static let corner = ChinaDatums.convert(GeoPoint(latitude: 31.23, longitude: 121.47), from: .wgs84, to: .gcj02)
        static func areas(of configuration: Configuration) throws -> [Area] {
            let c = corner
            return [
                Area(id: "route-7", name: "Route 7", datum: .gcj02, shape: .polygons([[
                    [Area.Point(latitude: c.latitude, longitude: c.longitude), Area.Point(latitude: c.latitude, longitude: c.longitude + 0.01),
                     Area.Point(latitude: c.latitude + 0.01, longitude: c.longitude + 0.01)],
                ]])),
                Area(id: "depot", datum: .wgs84, shape: .circle(center: Area.Point(latitude: 31.2, longitude: 121.4), radiusMeters: 250)),
            ]
        }
    }

    @Test func aThirdPartyTransformsAreasAreDrawnInTheDisplayDatum() throws {
        var registry = BuiltinPlugins.registry
        registry.register(transform: CorridorPlugin.self)
        let json = """
            {"sources":{"gps":{"type":"udp","port":10110}},
             "transforms":{"route":{"type":"corridor","inputs":["gps"]}},
             "sinks":{"out":{"type":"stdout","inputs":["route"]}}}
            """
        let configuration = try PipelineConfiguration.load(json: Array(json.utf8), registry: registry)
        let scene = LiveMapScene(configuration: configuration, display: .wgs84)

        #expect(scene.fences.map(\.id) == ["route-7", "depot"])
        #expect(scene.fences.allSatisfy { $0.origin == "transforms.route" })
        let route = try #require(scene.fences.first)
        #expect(route.name == "Route 7" && route.sourceDatum == "gcj02")
        guard case .polygons(let polygons) = route.shape else { Issue.record("route-7 is not a polygon"); return }
        let ring = try #require(polygons.first?.first)
        // Back in WGS84 within a few centimetres of where the corner was, and closed.
        #expect(abs(ring[0].latitude - 31.23) < 1e-6 && abs(ring[0].longitude - 121.47) < 1e-6, "\(ring[0])")
        #expect(ring.count == 4 && ring.first == ring.last)
        #expect(scene.fences[1].shape == .circle(center: MapPoint(latitude: 31.2, longitude: 121.4), radiusMeters: 250))
        #expect(scene.notes == ["transforms.route: 1 fence(s) converted from gcj02 to wgs84."])
    }
}
