import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// Debian's chromium, when installed (`make test` installs it).
let chromiumPath: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// The live map in a real browser: headless chromium with its real EventSource, watched through
/// the DevTools protocol (Support/livemap_browser.py), with every address off this machine failing.
@Suite(.enabled(if: chromiumPath != nil, "needs Debian's chromium (make test installs it)"), .timeLimit(.minutes(2)))
struct LiveMapBrowserTests {
    struct Look: Decodable {
        struct Device: Decodable { var device: String; var lat: String?; var lon: String?; var moves: String }
        var status: String
        var devices: [Device]
        var markers: [String]
        var fences: Int
        var components: [String]
    }

    @Test func thePageShowsOneMarkerPerDeviceAndMovesItWhenAPositionArrives() async throws {
        let boat1 = try nmeaServer(), boat2 = try nmeaServer()
        defer { boat1.stop(); boat2.stop() }
        let dir = try temporaryDirectory("browser")
        let json = """
        { "settings": { "stats_interval": false, "shutdown_timeout": "2s" },
          "api": { "listen": "127.0.0.1:$API_PORT", "token": "s3cret" },
          "sources": { "a": { "type": "tcp", "host": "127.0.0.1", "port": \(boat1.port), "device": "boat-1" },
                       "b": { "type": "tcp", "host": "127.0.0.1", "port": \(boat2.port), "device": "boat-2" } },
          "transforms": { "zone": { "type": "geofence", "inputs": ["a"], "events": ["enter"],
              "fences": {"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"dock","radius":50},"geometry":{"type":"Point","coordinates":[13.4,52.52]}}]} } },
          "sinks": { "out": { "type": "file", "inputs": ["zone", "b"], "path": "\(dir)/out.jsonl" } } }
        """
        try await APIHarness.run(json) { h in
            #expect(await Poll.until { (h.stats("sinks.out")?.emitted ?? 0) >= 4 })
            let driver = Process()
            driver.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            driver.arguments = ["python3", "\(packageRoot)/Tests/OperatorEndpointsTests/Support/livemap_browser.py", try #require(chromiumPath),
                                "http://127.0.0.1:\(h.port)/?token=s3cret", "2", "40", "\(dir)/profile"]
            let out = Pipe()
            driver.standardOutput = out
            driver.standardError = FileHandle.nullDevice
            try driver.run()
            defer { if driver.isRunning { kill(driver.processIdentifier, SIGKILL) } }
            let data = out.fileHandleForReading.readDataToEndOfFile()
            driver.waitUntilExit()
            let looks = try String(decoding: data, as: UTF8.self).split(separator: "\n").map { try JSONDecoder().decode(Look.self, from: Data($0.utf8)) }
            #expect(driver.terminationStatus == 0, "no marker moved: \(looks)")
            let first = try #require(looks.first), later = try #require(looks.last)
            #expect(looks.count == 2)
            #expect(first.status == "live")
            #expect(first.devices.map(\.device) == ["boat-1", "boat-2"])
            #expect(first.markers.count == 2, "one marker per device")
            #expect(later.markers.count == 2)
            #expect(first.fences == 1)
            #expect(first.components == ["sources.a", "sources.b", "transforms.zone", "sinks.out"])
            // The drawn marker moved, and with it the position the page shows.
            #expect(later.markers != first.markers)
            #expect(zip(first.devices, later.devices).contains { $0.lat != $1.lat && Int($1.moves) ?? 0 > 0 }, "\(looks)")
        }
    }
}
