import Foundation
import GatewayCore

/// A self-contained HTML map of tracks, fences and geofence events.
///
/// The page inlines Leaflet (``LeafletAssets``), its own script (``script``) and stylesheet
/// (``stylesheet``), and the data as JSON, so it opens from a file with no network. A live
/// page can serve the same ``script`` and ``stylesheet`` and feed `LocgateMap.create(…)`'s
/// `setTracks` / `setFences` / `setEvents` / `setNotes` from its own JSON in the
/// ``MapData/json`` shape.
public struct MapPage: Sendable {
    /// What to draw.
    public var data: MapData
    /// Page title.
    public var title: String
    /// A tile URL template (`https://tile.example.org/{z}/{x}/{y}.png`); nil draws a plain
    /// background with a graticule, and then the page references no URL at all.
    public var tiles: String?
    /// Attribution text shown with the tiles.
    public var tilesAttribution: String?

    public init(data: MapData, title: String = "locgate map", tiles: String? = nil, tilesAttribution: String? = nil) {
        self.data = data
        self.title = title
        self.tiles = tiles
        self.tilesAttribution = tilesAttribution
    }

    /// The whole HTML document.
    public func render(leaflet: LeafletAssets) -> String {
        var options: [UInt8] = Array("{".utf8)
        if let tiles {
            JSONWriter.appendString("tiles", to: &options)
            options.append(UInt8(ascii: ":"))
            JSONWriter.appendString(tiles, to: &options)
            if let tilesAttribution {
                options.append(contentsOf: Array(#","tilesAttribution":"#.utf8))
                JSONWriter.appendString(tilesAttribution, to: &options)
            }
        }
        options.append(UInt8(ascii: "}"))
        var html = Self.documentStart(leaflet: leaflet, title: title)
        html += "<script type=\"application/json\" id=\"locgate-map-data\">"
        html += Self.scriptSafe(String(decoding: data.json, as: UTF8.self))
        html += "</script>\n<script type=\"application/json\" id=\"locgate-map-options\">"
        html += Self.scriptSafe(String(decoding: options, as: UTF8.self))
        html += """
        </script>
        <script>
        LocgateMap.show(document.getElementById('locgate-map'),
          JSON.parse(document.getElementById('locgate-map-data').textContent),
          JSON.parse(document.getElementById('locgate-map-options').textContent));
        </script>
        </body>
        </html>\n
        """
        return html
    }

    /// `</` ends a script element wherever it appears; `<\/` means the same inside JS and JSON strings.
    static func scriptSafe(_ text: String) -> String {
        text.contains("</") ? text.replacingOccurrences(of: "</", with: "<\\/") : text
    }

    /// The page up to the map: head, Leaflet's and our stylesheets (plus `extraStylesheet`), the
    /// map element, and Leaflet's and our scripts, each page (offline, live) then adds its own.
    static func documentStart(leaflet: LeafletAssets, title: String, extraStylesheet: String = "", noReferrer: Bool = false) -> String {
        var html = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="generator" content="locgate">\(noReferrer ? "\n<meta name=\"referrer\" content=\"no-referrer\">" : "")
        <title>\(escapeHTML(title))</title>
        <style>\n
        """
        html += leaflet.stylesheet
        html += "</style>\n<style>\n"
        html += stylesheet
        html += extraStylesheet
        html += "</style>\n</head>\n<body>\n<div id=\"locgate-map\"></div>\n<script>\n"
        html += scriptSafe(leaflet.script)
        html += "\n</script>\n<script>\n"
        html += scriptSafe(script)
        html += "\n</script>\n"
        return html
    }

    static func escapeHTML(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
