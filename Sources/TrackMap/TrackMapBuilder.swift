import Foundation
import GatewayCore
import Geodesy
import MapRendering

/// A fence file and the datum its coordinates are in.
public struct FenceFile: Sendable, Hashable {
    public var path: String
    public var datum: ChinaDatums.Datum

    public init(path: String, datum: ChinaDatums.Datum = .wgs84) {
        self.path = path
        self.datum = datum
    }
}

/// What `locgate map` draws.
public struct TrackMapRequest: Sendable {
    /// Recorded files (NMEA, JSON Lines, GPX; the format follows the extension as for the `file` source).
    public var inputs: [String]
    public var fences: [FenceFile]
    /// Every layer is converted into this datum.
    public var datum: ChinaDatums.Datum
    /// Vertices per drawn track, at most.
    public var maxPoints: Int

    public static let defaultMaxPoints = 20_000

    public init(inputs: [String], fences: [FenceFile] = [], datum: ChinaDatums.Datum = .wgs84, maxPoints: Int = TrackMapRequest.defaultMaxPoints) {
        self.inputs = inputs
        self.fences = fences
        self.datum = datum
        self.maxPoints = maxPoints
    }
}

/// Why a map could not be made; `description` names the file and the reason.
public struct TrackMapError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// Reads tracks with the `file` source, fences with the `geofence` transform (both from the plugin
/// registry, as a pipeline would make them), runs the transform over every position for its
/// events, converts everything into the display datum and simplifies long tracks.
public enum TrackMapBuilder {
    /// Builds the map data with the `file` and `geofence` plugins of `registry`; throws when an
    /// input or fence file cannot be read, or an input has no fix.
    public static func build(_ request: TrackMapRequest, registry: PluginRegistry, logger: Logger) async throws(TrackMapError) -> MapData {
        let display = request.datum
        var data = MapData(datum: name(display))

        // Fences, one geofence transform per file: each file has its own datum.
        var geofences: [any PositionTransform] = []
        for file in request.fences {
            let document = try readFences(file)
            let origin = (file.path as NSString).lastPathComponent
            let prepared: PreparedComponent
            do {
                prepared = try MapComponents.prepare(.transform, "geofence", options: MapComponents.geofenceOptions(fences: document, datum: name(file.datum)),
                                                     registry: registry)
            } catch {
                throw TrackMapError(description: "\(file.path): \(fenceProblems(error))")
            }
            let areas: [Area]
            do {
                areas = try prepared.areas()
            } catch {
                throw TrackMapError(description: "\(file.path): \(error)")
            }
            for area in areas {
                let from = MapProjection.datum(area.datum) ?? file.datum
                data.fences.append(MapFence(id: area.id, name: area.name, origin: origin, sourceDatum: name(from),
                                            shape: MapProjection.shape(area.shape, from: from, to: display)))
            }
            let context = ComponentContext(id: "map-fences-\(geofences.count)", kind: .transform,
                                           logger: logger.child("fences.\(origin)"), stats: ComponentStats(id: origin))
            do {
                guard case .transform(let transform) = try prepared.build(context) else {
                    throw TrackMapError(description: "the geofence plugin made no transform")
                }
                geofences.append(transform)
            } catch {
                throw TrackMapError(description: "\(file.path): \(error)")
            }
            if file.datum != display {
                data.notes.append("\(origin): \(areas.count) fence(s) converted from \(name(file.datum)) to \(name(display)).")
            }
        }

        // Tracks, one per input file and device.
        let collector = MapCollector(transforms: geofences, display: display)
        for path in request.inputs {
            let format = MapComponents.InputFormat(forPath: path)
            let label = (path as NSString).lastPathComponent
            let source: any PositionSource
            do {
                let prepared = try MapComponents.prepare(.source, "file", options: MapComponents.fileOptions(path: path, format: format), registry: registry)
                let context = ComponentContext(id: label, kind: .source, logger: logger.child("inputs.\(label)"), stats: ComponentStats(id: label))
                guard case .source(let built) = try prepared.build(context) else {
                    throw TrackMapError(description: "the file plugin made no source")
                }
                source = built
            } catch let error as MapComponents.Problems {
                throw TrackMapError(description: "\(path): \(error.problems.map { "\($0.path): \($0.message)" }.joined(separator: "; "))")
            } catch {
                throw TrackMapError(description: "\(error)")
            }
            do {
                try await source.run(output: SourceOutput(deliver: { collector.take($0) }))
            } catch {
                throw TrackMapError(description: "\(error)")
            }
            let (events, fold) = collector.endInput()
            for e in events {
                guard let event = e.event, let fenceId = event.fenceId, let point = displayPoint(e, in: display) else { continue }
                data.events.append(MapEvent(kind: event.kind.rawValue, fenceId: fenceId, fenceName: event.fenceName,
                                            device: e.deviceKey, time: e.time, point: point))
            }
            if fold.total == 0 {
                throw TrackMapError(description: "\(path): no positions (an empty file, or nothing in it reads as \(format.rawValue))")
            }
            if fold.order.isEmpty {
                throw TrackMapError(description: "\(path): \(fold.total) position(s), none with a fix")
            }
            if fold.withoutFix > 0 {
                data.notes.append("\(label): \(fold.withoutFix.grouped) of \(fold.total.grouped) positions without a fix are not drawn.")
            }
            let converted = fold.datums.subtracting([name(display)]).sorted()
            if !converted.isEmpty {
                data.notes.append("\(label): converted from \(converted.joined(separator: ", ")) to \(name(display)).")
            }
            for key in fold.order {
                guard let track = fold.tracks[key] else { continue }
                let trackName = fold.order.count == 1 && key == label ? label : "\(label) · \(key)"
                data.tracks.append(track.mapTrack(name: trackName, maxPoints: request.maxPoints))
                if track.count > request.maxPoints, let drawn = data.tracks.last {
                    data.notes.append("\(trackName): simplified from \(track.count.grouped) to \(drawn.points.count.grouped) points"
                                      + " (Douglas–Peucker; no dropped fix is more than \(String(format: "%.1f", drawn.toleranceMeters ?? 0)) m from the line).")
                }
            }
        }
        if !request.fences.isEmpty && !request.inputs.isEmpty {
            data.notes.append("Events: the geofence transform's enter and exit with its defaults (no hysteresis, no border margin).")
        }
        return data
    }

    /// Reads a fence file as a JSON object; the geofence transform checks it holds GeoJSON fences.
    static func readFences(_ file: FenceFile) throws(TrackMapError) -> JSONValue {
        guard let bytes = FileManager.default.contents(atPath: file.path) else {
            let reason = FileManager.default.fileExists(atPath: file.path) ? "cannot read it" : "no such file"
            throw TrackMapError(description: "\(file.path): \(reason)")
        }
        let document: JSONValue
        do { document = try JSONValue.parse([UInt8](bytes)) } catch {
            throw TrackMapError(description: "\(file.path): not valid JSON: \(error)")
        }
        // Only an object is taken as inline fences: the transform reads a string as a file path.
        guard case .object = document else {
            throw TrackMapError(description: "\(file.path): expected a GeoJSON object")
        }
        return document
    }

    /// The geofence's problems with the fences given inline, at their paths inside the fence
    /// document (`features[0].geometry.coordinates: …`), as the fence loader names them.
    static func fenceProblems(_ error: MapComponents.Problems) -> String {
        error.problems.map { problem in
            let path = problem.path == "fences" ? "" : problem.path.hasPrefix("fences.") ? String(problem.path.dropFirst("fences.".count)) : problem.path
            return path.isEmpty ? problem.message : "\(path): \(problem.message)"
        }.joined(separator: "; ")
    }

    static func displayPoint(_ position: Position, in display: ChinaDatums.Datum) -> MapPoint? {
        MapProjection.point(position, in: display)
    }

    static func name(_ datum: ChinaDatums.Datum) -> String { MapProjection.name(datum) }
}

/// One input's positions as tracks, one per device, in the display datum; positions without a
/// fix are counted, not drawn.
struct TrackFold: Sendable {
    let display: ChinaDatums.Datum
    var tracks: [String: TrackAccumulator] = [:]
    /// Device keys in the order they first appeared.
    var order: [String] = []
    var total = 0
    var withoutFix = 0
    /// The datums the drawn positions were in.
    var datums: Set<String> = []

    init(display: ChinaDatums.Datum) {
        self.display = display
    }

    mutating func add(_ position: Position) {
        total += 1
        guard position.mode >= .twoD, let point = TrackMapBuilder.displayPoint(position, in: display) else {
            withoutFix += 1
            return
        }
        datums.insert(position.datum.isGeographic ? position.datum.name : "wgs84")
        let key = position.deviceKey
        if tracks[key] == nil { order.append(key) }
        tracks[key, default: TrackAccumulator()].append(point, time: position.time)
    }
}

/// One track's fixes as compact arrays (16 bytes a fix), so a million-fix file fits easily.
struct TrackAccumulator: Sendable {
    var latitudes: [Double] = []
    var longitudes: [Double] = []
    var first: Timestamp?
    var last: Timestamp?

    var count: Int { latitudes.count }

    mutating func append(_ p: MapPoint, time: Timestamp?) {
        latitudes.append(p.latitude)
        longitudes.append(p.longitude)
        if let time {
            if first == nil { first = time }
            last = time
        }
    }

    func mapTrack(name: String, maxPoints: Int) -> MapTrack {
        let simplified = TrackSimplifier.simplify(latitudes: latitudes, longitudes: longitudes, maxPoints: maxPoints)
        let points = simplified.indices.map { MapPoint(latitude: latitudes[$0], longitude: longitudes[$0]) }
        return MapTrack(name: name, points: points, originalCount: count,
                        toleranceMeters: points.count < count ? simplified.toleranceMeters : nil, start: first, end: last)
    }
}

extension Int {
    /// With thousands separators: 1,000,000.
    var grouped: String {
        let digits = String(magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return self < 0 ? "-" + out : out
    }
}
