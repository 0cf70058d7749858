import GatewayCore
import Geodesy
import MapRendering

/// `locgate map`: its command line and the page it writes.
public enum MapCommand {
    public static let usage = """
    usage: locgate map [--fences FILE.geojson ...] [--fence-datum wgs84|gcj02|bd09] [--datum wgs84|gcj02|bd09]
                       [--tiles URL [--tiles-attribution TEXT]] [--max-points N] [INPUT...] > map.html

      INPUT                 A recorded track: NMEA log (gpsd-style # lines fine), JSON Lines, or GPX
                            (by extension, as the file source: .jsonl/.json, .gpx, anything else NMEA).
      --fences FILE         GeoJSON fences as the geofence transform reads them (repeatable).
      --fence-datum DATUM   Datum of the --fences files that follow it (default wgs84).
      --datum DATUM         Display datum: every track, fence and event is converted into it (default wgs84).
      --tiles URL           Tile layer URL template ({z}/{x}/{y}); without it the page loads nothing
                            and draws a plain background with a graticule and a scale.
      --tiles-attribution TEXT  Attribution shown with the tiles.
      --max-points N        Vertices per drawn track at most; longer tracks are simplified (default 20000).

    Needs at least one INPUT or --fences. Exit status: 0, or 2 for a bad option or an input or fence
    file that cannot be read, holds no position, or no fix.
    """

    /// The parsed command line.
    public struct Arguments: Sendable {
        public var request = TrackMapRequest(inputs: [])
        public var tiles: String?
        public var tilesAttribution: String?
    }

    /// Parses the arguments after `map`; the error says which option is wrong.
    public static func parse(_ arguments: [String]) throws(TrackMapError) -> Arguments {
        var parsed = Arguments()
        var fenceDatum: ChinaDatums.Datum = .wgs84
        var fenceDatumUsed = true
        var i = 0
        func value(_ option: String) throws(TrackMapError) -> String {
            i += 1
            guard i < arguments.count else { throw TrackMapError(description: "\(option) needs a value") }
            return arguments[i]
        }
        func datum(_ option: String) throws(TrackMapError) -> ChinaDatums.Datum {
            let text = try value(option)
            switch Datum(parsing: text) {
            case .wgs84?: return .wgs84
            case .gcj02?: return .gcj02
            case .bd09?: return .bd09
            default: throw TrackMapError(description: "\(option): expected wgs84, gcj02 or bd09, got \"\(text)\"")
            }
        }
        var onlyInputs = false
        while i < arguments.count {
            let arg = arguments[i]
            if onlyInputs || !arg.hasPrefix("-") {
                // Said here: the `file` source would only call it a missing `path` option.
                if arg.isEmpty { throw TrackMapError(description: "an INPUT is an empty string, which names no file") }
                parsed.request.inputs.append(arg)
                i += 1
                continue
            }
            switch arg {
            case "--":
                onlyInputs = true
            case "--fences":
                parsed.request.fences.append(FenceFile(path: try value(arg), datum: fenceDatum))
                fenceDatumUsed = true
            case "--fence-datum":
                fenceDatum = try datum(arg)
                fenceDatumUsed = false
            case "--datum":
                parsed.request.datum = try datum(arg)
            case "--tiles":
                let url = try value(arg)
                guard url.contains("{z}"), url.contains("{x}"), url.contains("{y}") else {
                    throw TrackMapError(description: "--tiles: expected a URL template with {z}, {x} and {y}, got \"\(url)\"")
                }
                parsed.tiles = url
            case "--tiles-attribution":
                parsed.tilesAttribution = try value(arg)
            case "--max-points":
                let text = try value(arg)
                guard let n = Int(text), n >= 2, n <= 10_000_000 else {
                    throw TrackMapError(description: "--max-points: expected a whole number from 2 to 10000000, got \"\(text)\"")
                }
                parsed.request.maxPoints = n
            default:
                throw TrackMapError(description: "unknown option \(arg)")
            }
            i += 1
        }
        if !fenceDatumUsed {
            throw TrackMapError(description: "--fence-datum applies to the --fences files after it; none follows")
        }
        if parsed.tilesAttribution != nil && parsed.tiles == nil {
            throw TrackMapError(description: "--tiles-attribution needs --tiles")
        }
        if parsed.request.inputs.isEmpty && parsed.request.fences.isEmpty {
            throw TrackMapError(description: "nothing to draw: give an INPUT file or --fences")
        }
        return parsed
    }

    /// Parses the command line, reads everything with the `file` and `geofence` plugins of
    /// `registry` and returns the HTML page. Throws ``TrackMapError`` for bad options and unusable
    /// inputs (exit 2), ``LeafletAssetsError`` when Debian's libjs-leaflet is missing (exit 1: the
    /// machine, not the command, is at fault).
    public static func page(_ arguments: [String], registry: PluginRegistry, logger: Logger) async throws -> String {
        let parsed = try parse(arguments)
        // Leaflet first: a missing package should not cost a long read.
        let assets = try LeafletAssets()
        let data = try await TrackMapBuilder.build(parsed.request, registry: registry, logger: logger)
        let names = parsed.request.inputs.map { $0.split(separator: "/").last.map(String.init) ?? $0 }
        let title = names.isEmpty ? "locgate map" : "locgate map: " + names.joined(separator: ", ")
        return MapPage(data: data, title: title, tiles: parsed.tiles, tilesAttribution: parsed.tilesAttribution).render(leaflet: assets)
    }
}
