import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// The map file in a real browser: Debian's chromium, headless, with the network off.
@Suite(.enabled(if: chromiumPath != nil, "needs Debian's chromium (make test installs it)"), .timeLimit(.minutes(2)))
struct BrowserTests {
    /// The DOM after the page's scripts ran.
    func dumpDOM(_ page: String, directory: String) throws -> String {
        let chromium = try #require(chromiumPath)
        return try Program.run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                       "--user-data-dir=\(directory)/profile", "--window-size=1000,700",
                       // Any request off this machine would fail: the page must not need one.
                       "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
                       "--virtual-time-budget=5000", "--dump-dom", URL(fileURLWithPath: page).absoluteString]).stdout
    }

    /// Elements with the class `className` (a whole class name), as their opening tags.
    func elements(_ dom: String, class className: String) -> [String] {
        var found: [String] = []
        var rest = dom[...]
        while let r = rest.range(of: #"<[a-z]+ [^>]*class="(?:[^"]*\s)?"# + className + #"(?:\s[^"]*)?"[^>]*>"#, options: .regularExpression) {
            found.append(String(rest[r]))
            rest = rest[r.upperBound...]
        }
        return found
    }

    @Test func theMapOfAGpsdLogShowsItsTrackTheFencesAndTheEventMarkers() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fences = try writeTemporary("fences.geojson", fenceCollection(rectangles: [("channel", [52.8486, 5.3090, 52.8494, 5.3125])],
                                                                         circles: [("buoy", 52.8497, 5.3127, 40)]), in: dir)
        let result = try LocgateBinary.run(["map", "--fences", fences, boatLog])
        #expect(result.status == 0, "\(result.stderr)")
        let page = try writeTemporary("map.html", result.stdout, in: dir)
        let dom = try dumpDOM(page, directory: dir)

        // Leaflet drew SVG paths with real geometry for each layer.
        let tracks = elements(dom, class: "locgate-track")
        #expect(tracks.count == 1, "\(dom.prefix(2000))")
        // 149 fixes, drawn by Leaflet with its own pixel-level smoothing: still dozens of segments, not an empty path.
        #expect(tracks.first.map { $0.components(separatedBy: "L").count > 20 } == true, "\(tracks)")
        #expect(elements(dom, class: "locgate-fence").count == 2)
        #expect(elements(dom, class: "locgate-fence-circle").count == 1)
        #expect(elements(dom, class: "locgate-event-enter").count == 2)
        #expect(elements(dom, class: "locgate-event-exit").count == 2)
        for e in elements(dom, class: "locgate-event") { #expect(e.hasPrefix("<path") && e.contains(#" d="M"#), "\(e)") }
        // The scale bar, the graticule and the info panel.
        #expect(dom.contains("leaflet-control-scale-line"))
        #expect(elements(dom, class: "locgate-grid").count >= 4)
        #expect(dom.contains("bundg_zeus_9.log: 149 fixes"))
        #expect(dom.contains("2 enter") && dom.contains("2 exit"))
    }

    @Test func aSimplifiedTrackSaysSoOnThePage() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try LocgateBinary.run(["map", "--max-points", "30", boatLog])
        #expect(result.status == 0, "\(result.stderr)")
        let dom = try dumpDOM(try writeTemporary("map.html", result.stdout, in: dir), directory: dir)
        #expect(dom.contains("bundg_zeus_9.log: simplified from 149 to 30 points"))
        #expect(elements(dom, class: "locgate-track").count == 1)
    }
}
