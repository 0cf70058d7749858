import GatewayCore

/// A latitude/longitude pair in the map's display datum, in degrees.
public struct MapPoint: Sendable, Hashable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// One device's track as drawn: already converted into the display datum and simplified.
public struct MapTrack: Sendable, Hashable {
    /// Label in the layer list and tooltips (a file name, or file and device).
    public var name: String
    /// Vertices of the drawn line, oldest first.
    public var points: [MapPoint]
    /// How many positions with a fix the track had before simplification.
    public var originalCount: Int
    /// Largest distance in metres between a dropped position and the drawn line; nil when nothing was dropped.
    public var toleranceMeters: Double?
    /// Times of the first and last fix, when known.
    public var start: Timestamp?
    public var end: Timestamp?

    public init(name: String, points: [MapPoint], originalCount: Int, toleranceMeters: Double? = nil, start: Timestamp? = nil, end: Timestamp? = nil) {
        self.name = name
        self.points = points
        self.originalCount = originalCount
        self.toleranceMeters = toleranceMeters
        self.start = start
        self.end = end
    }
}

/// One fence as drawn, in the display datum.
public struct MapFence: Sendable, Hashable {
    /// The geometry: polygons (each an outer ring then holes), or a circle.
    public enum Shape: Sendable, Hashable {
        case polygons([[[MapPoint]]])
        case circle(center: MapPoint, radiusMeters: Double)
    }

    public var id: String
    public var name: String?
    /// Where it came from (a file name), shown in its tooltip.
    public var origin: String
    /// The datum the fence was written in (shown when it differs from the display datum).
    public var sourceDatum: String
    public var shape: Shape

    public init(id: String, name: String?, origin: String, sourceDatum: String, shape: Shape) {
        self.id = id
        self.name = name
        self.origin = origin
        self.sourceDatum = sourceDatum
        self.shape = shape
    }
}

/// A geofence transition, drawn where the position that confirmed it was.
public struct MapEvent: Sendable, Hashable {
    public var kind: String
    public var fenceId: String
    public var fenceName: String?
    public var device: String
    public var time: Timestamp?
    public var point: MapPoint

    public init(kind: String, fenceId: String, fenceName: String?, device: String, time: Timestamp?, point: MapPoint) {
        self.kind = kind
        self.fenceId = fenceId
        self.fenceName = fenceName
        self.device = device
        self.time = time
        self.point = point
    }
}

/// Everything one map shows; encoded as the JSON the page script (``MapPage/script``) draws.
public struct MapData: Sendable, Hashable {
    /// Name of the display datum every coordinate is in (`wgs84`, `gcj02`, `bd09`).
    public var datum: String
    public var tracks: [MapTrack]
    public var fences: [MapFence]
    public var events: [MapEvent]
    /// Lines for the info panel: conversions made, simplifications, skipped input.
    public var notes: [String]

    public init(datum: String, tracks: [MapTrack] = [], fences: [MapFence] = [], events: [MapEvent] = [], notes: [String] = []) {
        self.datum = datum
        self.tracks = tracks
        self.fences = fences
        self.events = events
        self.notes = notes
    }

    /// Decimals kept for coordinates: 1e-7° is about 1 cm, finer than any receiver.
    public static let coordinateDecimals = 7

    /// The JSON the page script reads:
    /// `{"datum", "tracks": [{"name", "points": [[lat, lon], …], "originalCount", "toleranceMeters"?, "start"?, "end"?}],
    /// "fences": [{"id", "name"?, "origin", "sourceDatum", "polygons": [[[[lat, lon], …], …], …]} | {…, "circle": {"center": [lat, lon], "radius"}}],
    /// "events": [{"kind", "fenceId", "fenceName"?, "device", "time"?, "point": [lat, lon]}], "notes": […]}`.
    public var json: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + tracks.reduce(0) { $0 + $1.points.count * 28 })
        func key(_ k: String) { JSONWriter.appendString(k, to: &out); out.append(UInt8(ascii: ":")) }
        func comma() { out.append(UInt8(ascii: ",")) }
        func point(_ p: MapPoint) {
            out.append(UInt8(ascii: "["))
            JSONWriter.appendNumber(p.latitude, decimals: Self.coordinateDecimals, to: &out)
            comma()
            JSONWriter.appendNumber(p.longitude, decimals: Self.coordinateDecimals, to: &out)
            out.append(UInt8(ascii: "]"))
        }
        func list<T>(_ items: [T], _ body: (T) -> Void) {
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { comma() }
                body(item)
            }
            out.append(UInt8(ascii: "]"))
        }
        func string(_ k: String, _ v: String?) {
            guard let v else { return }
            comma(); key(k); JSONWriter.appendString(v, to: &out)
        }

        out.append(UInt8(ascii: "{"))
        key("datum"); JSONWriter.appendString(datum, to: &out)
        comma(); key("tracks")
        list(tracks) { t in
            out.append(UInt8(ascii: "{"))
            key("name"); JSONWriter.appendString(t.name, to: &out)
            comma(); key("points"); list(t.points, point)
            comma(); key("originalCount"); JSONWriter.appendInt(Int64(t.originalCount), to: &out)
            if let tolerance = t.toleranceMeters {
                comma(); key("toleranceMeters"); JSONWriter.appendNumber(tolerance, decimals: 2, to: &out)
            }
            string("start", t.start?.iso8601)
            string("end", t.end?.iso8601)
            out.append(UInt8(ascii: "}"))
        }
        comma(); key("fences")
        list(fences) { f in
            out.append(UInt8(ascii: "{"))
            key("id"); JSONWriter.appendString(f.id, to: &out)
            string("name", f.name)
            string("origin", f.origin)
            string("sourceDatum", f.sourceDatum)
            comma()
            switch f.shape {
            case .polygons(let polygons):
                key("polygons"); list(polygons) { rings in list(rings) { ring in list(ring, point) } }
            case .circle(let center, let radius):
                key("circle"); out.append(UInt8(ascii: "{"))
                key("center"); point(center)
                comma(); key("radius"); JSONWriter.appendNumber(radius, decimals: 3, to: &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "}"))
        }
        comma(); key("events")
        list(events) { e in
            out.append(UInt8(ascii: "{"))
            key("kind"); JSONWriter.appendString(e.kind, to: &out)
            string("fenceId", e.fenceId)
            string("fenceName", e.fenceName)
            string("device", e.device)
            string("time", e.time?.iso8601)
            comma(); key("point"); point(e.point)
            out.append(UInt8(ascii: "}"))
        }
        comma(); key("notes")
        list(notes) { JSONWriter.appendString($0, to: &out) }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
