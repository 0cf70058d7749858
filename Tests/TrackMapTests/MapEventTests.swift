import FileInput
import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
import Geofence
import Testing

/// Events are marked where the geofence transform reports them.
@Suite struct MapEventTests {
    /// A rectangle across the middle of the boat's track, and a buoy circle near its end.
    let fences = fenceCollection(rectangles: [("channel", [52.8486, 5.3090, 52.8494, 5.3125])],
                                 circles: [("buoy", 52.8497, 5.3127, 40)])

    @Test func eventsAreTheGeofenceTransformsAtThePositionsThatCausedThem() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try writeTemporary("fences.geojson", fences, in: dir)
        let data = try embeddedData(try await mapPage(["--fences", path, boatLog]))
        let drawn = (data["events"]?.arrayValue ?? []).map { e in
            "\(e["kind"]?.stringValue ?? "") \(e["fenceId"]?.stringValue ?? "") \(e["time"]?.stringValue ?? "") \(points(JSONValue.array([e["point"] ?? .null])))"
        }

        // The same log through the file source's reader and a geofence transform configured as a pipeline would.
        let configuration = try PluginOptions.valid(GeofencePlugin.self, #"{"fences": \#(fences), "events": ["enter", "exit"]}"#)
        let context = ComponentContext(id: "fence", kind: .transform, logger: Logger(label: "t", handler: SilentLogHandler()), stats: ComponentStats(id: "fence"))
        var transform = try GeofenceTransform(configuration: configuration, context: context)
        var reader = try PositionFileReader(configuration: FileReplayConfiguration(path: boatLog),
                                            context: ComponentContext(id: "bundg_zeus_9.log", kind: .source, logger: context.logger, stats: ComponentStats(id: "s")),
                                            idPrefix: "")
        var expected: [String] = []
        var output: [Position] = []
        while let batch = try reader.next() {
            for p in batch {
                output.removeAll()
                transform.process(p, into: &output)
                for e in output {
                    guard let event = e.event, let lat = e.latitude, let lon = e.longitude else { continue }
                    let point = points(JSONValue.array([.array([.number((lat * 1e7).rounded() / 1e7), .number((lon * 1e7).rounded() / 1e7)])]))
                    expected.append("\(event.kind.rawValue) \(event.fenceId ?? "") \(e.time?.iso8601 ?? "") \(point)")
                }
            }
        }
        #expect(expected.count == 4, "the track enters and leaves both fences: \(expected)")
        #expect(drawn.sorted() == expected.sorted())

        // And independently of the transform: each enter is inside its fence, each exit outside.
        let loaded = try FenceLoader().load(try JSONValue.parse(string: fences))
        for e in data["events"]?.arrayValue ?? [] {
            let marked = points(JSONValue.array([e["point"] ?? .null])).first
            let p = try #require(marked)
            let fence = try #require(loaded.first { $0.id == e["fenceId"]?.stringValue })
            let inside = fence.shape.contains(GeoPoint(latitude: p.0, longitude: p.1))
            #expect(inside == (e["kind"]?.stringValue == "enter"), "\(e)")
        }
    }

    @Test func withoutFencesThereAreNoEventsAndNoEventNote() async throws {
        let data = try embeddedData(try await mapPage([boatLog]))
        #expect(data["events"]?.arrayValue?.isEmpty == true)
        #expect(data["fences"]?.arrayValue?.isEmpty == true)
    }
}
