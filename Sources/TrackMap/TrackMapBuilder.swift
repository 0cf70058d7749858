import FileReplay
import Foundation
import GatewayCore
import Geodesy
import Geofence
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

/// Reads tracks with the `file` source's reader, fences with the geofence plugin's loader,
/// runs the geofence transform over every position for its events, converts everything into
/// the display datum and simplifies long tracks.
public enum TrackMapBuilder {
    /// Builds the map data; throws when an input or fence file cannot be read, or an input has no fix.
    public static func build(_ request: TrackMapRequest, logger: Logger) throws(TrackMapError) -> MapData {
        let display = request.datum
        var data = MapData(datum: name(display))

        // Fences, one geofence transform per file: each file has its own datum.
        var geofences: [GeofenceTransform] = []
        for file in request.fences {
            let fences = try loadFences(file)
            let origin = (file.path as NSString).lastPathComponent
            for fence in fences {
                data.fences.append(MapFence(id: fence.id, name: fence.name, origin: origin, sourceDatum: name(file.datum),
                                            shape: convert(fence.shape, from: file.datum, to: display)))
            }
            var configuration = GeofenceConfiguration()
            configuration.source = .inline(fences)
            configuration.fenceDatum = file.datum
            configuration.action = .annotate
            configuration.events = [.enter, .exit]
            configuration.reload = nil
            let context = ComponentContext(id: "map-fences-\(geofences.count)", kind: .transform,
                                           logger: logger.child("fences.\(origin)"), stats: ComponentStats(id: origin))
            do {
                geofences.append(try GeofenceTransform(configuration: configuration, context: context))
            } catch {
                throw TrackMapError(description: "\(file.path): \(error)")
            }
            if file.datum != display {
                data.notes.append("\(origin): \(fences.count) fence(s) converted from \(name(file.datum)) to \(name(display)).")
            }
        }

        // Tracks, one per input file and device.
        var output: [Position] = []
        for path in request.inputs {
            var configuration = FileReplayConfiguration(path: path)
            configuration.progress = false
            let label = (path as NSString).lastPathComponent
            let context = ComponentContext(id: label, kind: .source, logger: logger.child("inputs.\(label)"), stats: ComponentStats(id: label))
            var reader: PositionFileReader
            do {
                reader = try PositionFileReader(configuration: configuration, context: context, idPrefix: "\(label)-")
            } catch {
                throw TrackMapError(description: "\(error)")
            }
            defer { reader.close() }
            var tracks: [String: TrackAccumulator] = [:]
            var order: [String] = []
            var total = 0, withoutFix = 0
            var datums: Set<String> = []
            do {
                while let batch = try reader.next() {
                    for position in batch {
                        total += 1
                        for g in geofences.indices {
                            output.removeAll(keepingCapacity: true)
                            geofences[g].process(position, into: &output)
                            for e in output {
                                guard let event = e.event, let fenceId = event.fenceId, let point = displayPoint(e, in: display) else { continue }
                                data.events.append(MapEvent(kind: event.kind.rawValue, fenceId: fenceId, fenceName: event.fenceName,
                                                            device: e.deviceKey, time: e.time, point: point))
                            }
                        }
                        guard position.mode >= .twoD, let point = displayPoint(position, in: display) else {
                            withoutFix += 1
                            continue
                        }
                        datums.insert(position.datum.isGeographic ? position.datum.name : "wgs84")
                        let key = position.deviceKey
                        if tracks[key] == nil { order.append(key) }
                        tracks[key, default: TrackAccumulator()].append(point, time: position.time)
                    }
                }
            } catch {
                throw TrackMapError(description: "\(error)")
            }
            if total == 0 {
                throw TrackMapError(description: "\(path): no positions (an empty file, or nothing in it reads as \(configuration.format.rawValue))")
            }
            if order.isEmpty {
                throw TrackMapError(description: "\(path): \(total) position(s), none with a fix")
            }
            if withoutFix > 0 {
                data.notes.append("\(label): \(withoutFix.grouped) of \(total.grouped) positions without a fix are not drawn.")
            }
            let converted = datums.subtracting([name(display)]).sorted()
            if !converted.isEmpty {
                data.notes.append("\(label): converted from \(converted.joined(separator: ", ")) to \(name(display)).")
            }
            for key in order {
                guard let track = tracks[key] else { continue }
                let trackName = order.count == 1 && key == label ? label : "\(label) · \(key)"
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

    /// Reads a fence file with the geofence plugin's loader.
    static func loadFences(_ file: FenceFile) throws(TrackMapError) -> [Fence] {
        guard let bytes = FileManager.default.contents(atPath: file.path) else {
            let reason = FileManager.default.fileExists(atPath: file.path) ? "cannot read it" : "no such file"
            throw TrackMapError(description: "\(file.path): \(reason)")
        }
        let document: JSONValue
        do { document = try JSONValue.parse([UInt8](bytes)) } catch {
            throw TrackMapError(description: "\(file.path): not valid JSON: \(error)")
        }
        do {
            return try FenceLoader().load(document)
        } catch {
            throw TrackMapError(description: "\(file.path): \(error)")
        }
    }

    static func displayPoint(_ position: Position, in display: ChinaDatums.Datum) -> MapPoint? {
        MapProjection.point(position, in: display)
    }

    static func convert(_ shape: FenceShape, from: ChinaDatums.Datum, to: ChinaDatums.Datum) -> MapFence.Shape {
        MapProjection.shape(shape, from: from, to: to)
    }

    static func name(_ datum: ChinaDatums.Datum) -> String { MapProjection.name(datum) }
}

/// One track's fixes as compact arrays (16 bytes a fix), so a million-fix file fits easily.
struct TrackAccumulator {
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
