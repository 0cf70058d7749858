import GatewayCore

/// Text formats for writing positions: shared by the file, stdout and HTTP sinks.
///
/// Each format is a header, records with a separator between them, and a trailer, so a sink can
/// write a complete, valid document after every batch and continue it later.
public enum PositionFormat: String, Sendable, CaseIterable {
    /// One JSON object per line (gpsd TPV field names; see ``PositionJSON``).
    case jsonl
    /// A JSON array of the same objects.
    case jsonArray = "json_array"
    /// Comma-separated values with a header line.
    case csv
    /// A GeoJSON FeatureCollection of Point features.
    case geojson
    /// A GPX 1.1 document with one track.
    case gpx

    public var header: String {
        switch self {
        case .jsonl: ""
        case .jsonArray: "["
        case .csv: PositionFormat.csvColumns.joined(separator: ",") + "\n"
        case .geojson: #"{"type":"FeatureCollection","features":["# + "\n"
        case .gpx:
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <gpx version="1.1" creator="locgate" xmlns="http://www.topografix.com/GPX/1/1" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd">
            <trk><name>locgate</name><trkseg>

            """
        }
    }

    /// Written between two records.
    public var separator: String {
        switch self {
        case .jsonArray: ","
        case .geojson: ",\n"
        default: ""
        }
    }

    public var trailer: String {
        switch self {
        case .jsonl, .csv: ""
        case .jsonArray: "]"
        case .geojson: "\n]}\n"
        case .gpx: "</trkseg></trk></gpx>\n"
        }
    }

    /// The usual file extension.
    public var fileExtension: String {
        switch self {
        case .jsonl: "jsonl"
        case .jsonArray: "json"
        case .csv: "csv"
        case .geojson: "geojson"
        case .gpx: "gpx"
        }
    }

    /// The CSV header. `event`, `fence`, `fence_name`: a geofence event (its type, fence id and
    /// name); `fences`, `fence_names`: the geofence annotation; `attributes`: every other
    /// attribute as a JSON object (empty when there is none).
    public static let csvColumns = [
        "time", "lat", "lon", "altMSL", "speed", "track", "mode", "status", "uSat", "hdop", "eph",
        "datum", "x", "y", "device", "source", "id", "event", "fence", "fence_name", "fences", "fence_names", "attributes",
    ]

    /// Attributes with columns of their own in CSV.
    static let csvAttributeColumns: Set<String> = ["fences", "fence_names"]

    /// Appends one record (without separator; `jsonl` and `csv` records end with a newline).
    public func appendRecord(_ p: Position, to out: inout [UInt8]) {
        var none = PositionJSON.TextCache.none
        appendRecord(p, to: &out, cache: &none)
    }

    /// ``appendRecord(_:to:)`` for a sink writing many records: the JSON formats take repeated
    /// attributes' text from `cache` (``PositionJSON/TextCache``).
    public func appendRecord(_ p: Position, to out: inout [UInt8], cache: inout PositionJSON.TextCache) {
        withUnsafePointer(to: p) { appendRecord(at: $0, to: &out, cache: &cache) }
    }

    /// Appends a batch's records, each after the format's separator when a record precedes it
    /// (`afterRecord`: one already does in the document; then each one written). GPX has no
    /// point for a position without coordinates: those are left out. Returns the number of
    /// records written.
    ///
    /// This is how sinks write: the positions are read where the batch holds them. Passing a
    /// batch's element to a function copies it (retaining and later releasing its strings), which
    /// cost about 7% of writing a JSON record.
    @discardableResult
    public func appendRecords(_ batch: [Position], to out: inout [UInt8], cache: inout PositionJSON.TextCache,
                              afterRecord: Bool = false) -> Int {
        let separator = self.separator.utf8
        var written = 0
        batch.withUnsafeBufferPointer { positions in
            guard let base = positions.baseAddress else { return }
            for i in positions.indices {
                let p = base + i
                if self == .gpx && !p.pointee.hasCoordinates { continue }
                if !separator.isEmpty && (afterRecord || written > 0) { out.append(contentsOf: separator) }
                appendRecord(at: p, to: &out, cache: &cache)
                written += 1
            }
        }
        return written
    }

    private func appendRecord(at p: UnsafePointer<Position>, to out: inout [UInt8], cache: inout PositionJSON.TextCache) {
        switch self {
        case .jsonl:
            PositionJSON.append(at: p, to: &out, cache: &cache)
            out.append(10)
        case .jsonArray:
            PositionJSON.append(at: p, to: &out, cache: &cache)
        case .csv:
            PositionFormat.appendCSV(p.pointee, to: &out)
        case .geojson:
            PositionFormat.appendFeature(p.pointee, to: &out)
        case .gpx:
            PositionFormat.appendTrackPoint(p.pointee, to: &out)
        }
    }

    /// A whole document for a batch (the HTTP sink's bodies).
    public func document(_ positions: [Position]) -> [UInt8] {
        var out = Array(header.utf8)
        var textCache = PositionJSON.TextCache()
        appendRecords(positions, to: &out, cache: &textCache)
        out.append(contentsOf: trailer.utf8)
        return out
    }

    // MARK: - CSV

    static func appendCSV(_ p: Position, to out: inout [UInt8]) {
        func field(_ s: String) {
            if s.utf8.contains(where: { $0 == 44 || $0 == 34 || $0 == 10 || $0 == 13 }) {
                out.append(34)
                for b in s.utf8 { if b == 34 { out.append(34) }; out.append(b) }
                out.append(34)
            } else {
                out.append(contentsOf: s.utf8)
            }
        }
        func num(_ v: Double?, _ decimals: Int) { if let v { JSONWriter.appendNumber(v, decimals: decimals, to: &out) } }
        func comma() { out.append(44) }
        if let t = p.time { t.appendISO8601(to: &out) }
        comma(); num(p.latitude, 9)
        comma(); num(p.longitude, 9)
        comma(); num(p.altitude, 3)
        comma(); num(p.speed, 3)
        comma(); num(p.course, 3)
        comma(); JSONWriter.appendInt(Int64(p.mode.rawValue), to: &out)
        comma(); if let q = p.quality { JSONWriter.appendInt(Int64(q.rawValue), to: &out) }
        comma(); if let s = p.satellites { JSONWriter.appendInt(Int64(s), to: &out) }
        comma(); num(p.hdop, 2)
        comma(); num(p.horizontalError, 3)
        comma(); field(p.datum.name)
        comma(); num(p.x, 3)
        comma(); num(p.y, 3)
        comma(); field(p.device ?? "")
        comma(); field(p.source)
        comma(); field(p.id)
        comma(); field(p.event?.kind.rawValue ?? "")
        comma(); field(p.event?.fenceId ?? "")
        comma(); field(p.event?.fenceName ?? "")
        comma(); field(p.attributes["fences"] ?? "")
        comma(); field(p.attributes["fence_names"] ?? "")
        comma()
        let others = p.attributes.filter { !csvAttributeColumns.contains($0.key) }
        if !others.isEmpty {
            var json: [UInt8] = [UInt8(ascii: "{")]
            for (i, k) in others.keys.sorted().enumerated() {
                if i > 0 { json.append(UInt8(ascii: ",")) }
                JSONWriter.appendString(k, to: &json)
                json.append(UInt8(ascii: ":"))
                JSONWriter.appendString(others[k] ?? "", to: &json)
            }
            json.append(UInt8(ascii: "}"))
            field(String(decoding: json, as: UTF8.self))
        }
        out.append(10)
    }

    // MARK: - GeoJSON

    static func appendFeature(_ p: Position, to out: inout [UInt8]) {
        out.append(contentsOf: #"{"type":"Feature","geometry":"#.utf8)
        if let lat = p.latitude, let lon = p.longitude {
            out.append(contentsOf: #"{"type":"Point","coordinates":["#.utf8)
            JSONWriter.appendNumber(lon, decimals: 9, to: &out)
            out.append(44)
            JSONWriter.appendNumber(lat, decimals: 9, to: &out)
            if let alt = p.altitude { out.append(44); JSONWriter.appendNumber(alt, decimals: 3, to: &out) }
            out.append(contentsOf: "]}".utf8)
        } else {
            out.append(contentsOf: "null".utf8)
        }
        // Properties are the JSON object without the coordinates already in the geometry.
        var props = p
        props.latitude = nil
        props.longitude = nil
        props.altitude = nil
        out.append(contentsOf: #","properties":"#.utf8)
        PositionJSON.append(props, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    // MARK: - GPX

    static func appendTrackPoint(_ p: Position, to out: inout [UInt8]) {
        guard let lat = p.latitude, let lon = p.longitude else { return }
        out.append(contentsOf: #"<trkpt lat=""#.utf8)
        JSONWriter.appendNumber(lat, decimals: 9, to: &out)
        out.append(contentsOf: #"" lon=""#.utf8)
        JSONWriter.appendNumber(lon, decimals: 9, to: &out)
        out.append(contentsOf: #"">"#.utf8)
        if let alt = p.altitude { out.append(contentsOf: "<ele>".utf8); JSONWriter.appendNumber(alt, decimals: 3, to: &out); out.append(contentsOf: "</ele>".utf8) }
        if let t = p.time { out.append(contentsOf: "<time>".utf8); t.appendISO8601(to: &out); out.append(contentsOf: "</time>".utf8) }
        let detail = p.detail
        if let alt = p.altitude, let hae = detail?.ellipsoidHeight {
            // GPX's geoidheight is the geoid's height above the ellipsoid: altHAE − altMSL.
            out.append(contentsOf: "<geoidheight>".utf8); JSONWriter.appendNumber(hae - alt, decimals: 3, to: &out); out.append(contentsOf: "</geoidheight>".utf8)
        }
        let fix: String? = switch (p.mode, p.quality) {
        case (.noFix, _): "none"
        case (_, .dgps?): "dgps"
        case (.twoD, _): "2d"
        case (.threeD, _): "3d"
        default: nil
        }
        if let fix { out.append(contentsOf: "<fix>\(fix)</fix>".utf8) }
        if let s = p.satellites { out.append(contentsOf: "<sat>\(s)</sat>".utf8) }
        if let v = p.hdop { out.append(contentsOf: "<hdop>".utf8); JSONWriter.appendNumber(v, decimals: 2, to: &out); out.append(contentsOf: "</hdop>".utf8) }
        if let v = p.vdop { out.append(contentsOf: "<vdop>".utf8); JSONWriter.appendNumber(v, decimals: 2, to: &out); out.append(contentsOf: "</vdop>".utf8) }
        if let v = p.pdop { out.append(contentsOf: "<pdop>".utf8); JSONWriter.appendNumber(v, decimals: 2, to: &out); out.append(contentsOf: "</pdop>".utf8) }
        if let v = detail?.correctionAge { out.append(contentsOf: "<ageofdgpsdata>".utf8); JSONWriter.appendNumber(v, decimals: 3, to: &out); out.append(contentsOf: "</ageofdgpsdata>".utf8) }
        if p.speed != nil || p.course != nil {
            // GPX 1.1 has no speed or course; the Garmin TrackPointExtension-style names are widely read.
            out.append(contentsOf: "<extensions>".utf8)
            if let v = p.speed { out.append(contentsOf: "<speed>".utf8); JSONWriter.appendNumber(v, decimals: 3, to: &out); out.append(contentsOf: "</speed>".utf8) }
            if let v = p.course { out.append(contentsOf: "<course>".utf8); JSONWriter.appendNumber(v, decimals: 3, to: &out); out.append(contentsOf: "</course>".utf8) }
            out.append(contentsOf: "</extensions>".utf8)
        }
        out.append(contentsOf: "</trkpt>\n".utf8)
    }
}
