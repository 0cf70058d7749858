import GatewayCore
import Geodesy

/// A position as a line of COPY text for its table: the outbox payload of the `postgres` sink.
///
/// A position is encoded once, when it is committed to the outbox; a batch is then the
/// concatenation of its records' payloads, sent as they are. A position with an event becomes a
/// line of `events`, any other a line of `positions` (the columns of ``PostgresSchema/columns(_:)``,
/// in order). The point is hex EWKB (PointZ, SRID 4326), so PostgreSQL parses no text for it.
/// Coordinates in GCJ-02 or BD-09 are kept as given (`datum`, `datum_x`, `datum_y`) and converted
/// back to WGS84 for `geom` with Geodesy's exact inverses, so spatial queries see where the fix was.
enum PostgresRows {
    /// Appends the `positions` line of `p` (ending in a newline).
    static func appendPosition(_ p: Position, bounds: ChinaBounds, to out: inout [UInt8]) {
        text(p.id, &out)
        tab(&out)
        text(p.deviceKey, &out)
        tab(&out)
        text(p.source, &out)
        tab(&out)
        time(p.time, &out)
        tab(&out)
        point(p, bounds: bounds, &out)
        tab(&out)
        number(p.altitude, &out)
        tab(&out)
        number(p.speed, &out)
        tab(&out)
        number(p.course, &out)
        tab(&out)
        number(p.hdop, &out)
        tab(&out)
        number(p.horizontalError, &out)
        tab(&out)
        JSONWriter.appendInt(Int64(p.mode.rawValue), to: &out)
        tab(&out)
        if let q = p.quality { JSONWriter.appendInt(Int64(q.rawValue), to: &out) } else { null(&out) }
        tab(&out)
        if let s = p.satellites, s >= 0, s <= Int(Int16.max) { JSONWriter.appendInt(Int64(s), to: &out) } else { null(&out) }
        tab(&out)
        place(p, &out)
        out.append(UInt8(ascii: "\n"))
    }

    /// Appends the `events` line of `p`, which carries `event` (ending in a newline).
    static func appendEvent(_ p: Position, _ event: PositionEvent, bounds: ChinaBounds, to out: inout [UInt8]) {
        text(p.id, &out)
        tab(&out)
        optionalText(triggeringID(p, event), &out)
        tab(&out)
        text(p.deviceKey, &out)
        tab(&out)
        text(p.source, &out)
        tab(&out)
        time(p.time, &out)
        tab(&out)
        text(event.kind.rawValue, &out)
        tab(&out)
        optionalText(event.fenceId, &out)
        tab(&out)
        optionalText(event.fenceName, &out)
        tab(&out)
        optionalText(event.status, &out)
        tab(&out)
        point(p, bounds: bounds, &out)
        tab(&out)
        place(p, &out)
        out.append(UInt8(ascii: "\n"))
    }

    /// `datum`, `datum_x`, `datum_y`, `attributes`.
    private static func place(_ p: Position, _ out: inout [UInt8]) {
        text(p.datum.name, &out)
        tab(&out)
        // As given: longitude and latitude in a geographic datum, easting and northing in a projected one.
        if p.datum.isGeographic {
            number(p.longitude, &out)
            tab(&out)
            number(p.latitude, &out)
        } else {
            number(p.x, &out)
            tab(&out)
            number(p.y, &out)
        }
        tab(&out)
        attributes(p.attributes, &out)
    }

    /// The WGS84 longitude and latitude of a position: as carried for WGS84 and for projected
    /// datums (whose latitude/longitude are WGS84 beside x/y), converted back exactly from GCJ-02
    /// and BD-09, nil without coordinates or in a datum nobody can convert.
    static func wgs84(_ p: Position, bounds: ChinaBounds) -> GeoPoint? {
        guard let latitude = p.latitude, let longitude = p.longitude, latitude.isFinite, longitude.isFinite else { return nil }
        let point = GeoPoint(latitude: latitude, longitude: longitude)
        switch p.datum {
        case .wgs84: return point
        case .gcj02: return ChinaDatums.gcj02ToWGS84(point, bounds: bounds)
        case .bd09: return ChinaDatums.bd09ToWGS84(point, bounds: bounds)
        default: return p.datum.isGeographic ? nil : point
        }
    }

    /// The id of the position an event belongs to: geofence events are that position's id plus
    /// `-<type>-<fence>`, `fix_regained`, `rtk_*` and motion events plus `-<type>`; timer and receiver reports (no_data,
    /// fix_lost, data_resumed, antenna, jamming, spoofing) belong to none.
    static func triggeringID(_ p: Position, _ e: PositionEvent) -> String? {
        let suffix: String
        switch e.kind {
        case .enter, .exit, .dwell: suffix = "-\(e.kind.rawValue)-\(e.fenceId ?? "")"
        case .fixRegained, .tripStart, .tripEnd, .stopStart, .stopEnd, .ignitionOn, .ignitionOff, .overspeed, .idle,
             .rtkFixed, .rtkFloat, .rtkLost:
            suffix = "-\(e.kind.rawValue)"
        case .fixLost, .noData, .dataResumed, .antenna, .jamming, .spoofing, .command: return nil
        }
        let id = p.id
        guard id.hasSuffix(suffix), id.utf8.count > suffix.utf8.count else { return nil }
        return String(id.dropLast(suffix.count))
    }

    // MARK: - Reading lines back

    /// Column indexes in a `positions` line, for ``newestPerDevice(_:)``.
    static let deviceColumn = 1, timeColumn = 3, geomColumn = 4

    /// Of `lines` (`positions` lines with the position ids they belong to), the id of each
    /// device's newest fix — a time and a point — for `latest`. Times compare as text: they are
    /// written in one fixed-width form (``time(_:_:)``).
    static func newestPerDevice(_ lines: [(id: String, line: [UInt8])]) -> [String] {
        var newest: [ArraySlice<UInt8>: (time: ArraySlice<UInt8>, index: Int)] = [:]
        for (index, entry) in lines.enumerated() {
            var fields: [ArraySlice<UInt8>] = []
            fields.reserveCapacity(geomColumn + 1)
            var start = entry.line.startIndex
            for i in entry.line.indices where entry.line[i] == UInt8(ascii: "\t") {
                fields.append(entry.line[start..<i])
                start = i + 1
                if fields.count > geomColumn { break }
            }
            guard fields.count > geomColumn else { continue }
            let time = fields[timeColumn], device = fields[deviceColumn]
            guard !isNull(time), !isNull(fields[geomColumn]) else { continue }
            // A later line wins a tie: it was committed later.
            if let known = newest[device], time.lexicographicallyPrecedes(known.time) { continue }
            newest[device] = (time, index)
        }
        return newest.values.sorted { $0.index < $1.index }.map { lines[$0.index].id }
    }

    private static func isNull(_ field: ArraySlice<UInt8>) -> Bool {
        field.count == 2 && field.first == UInt8(ascii: "\\") && field.last == UInt8(ascii: "N")
    }

    // MARK: - COPY text

    @inline(__always) private static func tab(_ out: inout [UInt8]) { out.append(UInt8(ascii: "\t")) }

    @inline(__always) private static func null(_ out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        out.append(UInt8(ascii: "N"))
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, one fixed width, which timestamptz reads; NULL when unknown.
    private static func time(_ t: Timestamp?, _ out: inout [UInt8]) {
        guard let t else { return null(&out) }
        t.appendISO8601(to: &out)
    }

    /// The WGS84 point as hex EWKB: PointZ with SRID 4326; Z is the altitude, 0 when unknown
    /// (GeoJSON and WKT have no NaN). NULL without coordinates.
    private static func point(_ p: Position, bounds: ChinaBounds, _ out: inout [UInt8]) {
        guard let w = wgs84(p, bounds: bounds) else { return null(&out) }
        let z = p.altitude.flatMap { $0.isFinite ? $0 : nil } ?? 0
        // Little-endian; type 1 (point) with the Z (0x80000000) and SRID (0x20000000) flags.
        hex(UInt64(1), bytes: 1, &out)
        hex(UInt64(0xA000_0001), bytes: 4, &out)
        hex(UInt64(4326), bytes: 4, &out)
        for v in [w.longitude, w.latitude, z] { hex(v.bitPattern, bytes: 8, &out) }
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// The low `bytes` bytes of `v`, least significant first, as hex.
    @inline(__always) private static func hex(_ v: UInt64, bytes: Int, _ out: inout [UInt8]) {
        for i in 0..<bytes {
            let b = Int((v >> (8 * UInt64(i))) & 0xFF)
            out.append(hexDigits[b >> 4])
            out.append(hexDigits[b & 0xF])
        }
    }

    /// A number in the shortest form that reads back exactly; NULL when absent or not finite.
    private static func number(_ v: Double?, _ out: inout [UInt8]) {
        guard let v, v.isFinite else { return null(&out) }
        JSONWriter.appendNumber(v, to: &out)
    }

    private static func optionalText(_ s: String?, _ out: inout [UInt8]) {
        if let s { text(s, &out) } else { null(&out) }
    }

    /// A text value with COPY's escapes; NUL, which no PostgreSQL text can hold, is dropped.
    private static func text(_ s: String, _ out: inout [UInt8]) {
        var s = s
        s.withUTF8 { escaped($0, &out) }
    }

    private static func escaped(_ bytes: UnsafeBufferPointer<UInt8>, _ out: inout [UInt8]) {
        var start = 0
        for (i, b) in bytes.enumerated() where b == UInt8(ascii: "\\") || b < 0x20 {
            let replacement: UInt8
            switch b {
            case UInt8(ascii: "\\"): replacement = UInt8(ascii: "\\")
            case UInt8(ascii: "\t"): replacement = UInt8(ascii: "t")
            case UInt8(ascii: "\n"): replacement = UInt8(ascii: "n")
            case UInt8(ascii: "\r"): replacement = UInt8(ascii: "r")
            case 0: replacement = 0
            default: continue
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
            if replacement != 0 {
                out.append(UInt8(ascii: "\\"))
                out.append(replacement)
            }
            start = i + 1
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
    }

    /// The attributes as a JSON object (keys sorted), NULL when there are none.
    private static func attributes(_ attributes: [String: String], _ out: inout [UInt8]) {
        guard !attributes.isEmpty else { return null(&out) }
        var json: [UInt8] = [UInt8(ascii: "{")]
        // jsonb refuses \u0000: a NUL in an attribute becomes U+FFFD.
        func clean(_ s: String) -> String { s.utf8.contains(0) ? s.replacingOccurrences(of: "\0", with: "\u{FFFD}") : s }
        for (i, key) in attributes.keys.sorted().enumerated() {
            if i > 0 { json.append(UInt8(ascii: ",")) }
            JSONWriter.appendString(clean(key), to: &json)
            json.append(UInt8(ascii: ":"))
            JSONWriter.appendString(clean(attributes[key] ?? ""), to: &json)
        }
        json.append(UInt8(ascii: "}"))
        json.withUnsafeBufferPointer { escaped($0, &out) }
    }
}
