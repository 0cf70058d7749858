import Foundation
import GatewayCore
import Synchronization

/// How a batch becomes a request body: a header, records with a separator, and a trailer.
public enum BodyFormat: Sendable {
    /// A JSON array of position objects (``PositionJSON``).
    case jsonArray
    /// One position object per line.
    case jsonl
    /// A GeoJSON FeatureCollection.
    case geojson
    /// A user's JSON document with the records at a placeholder, each record mapped field by field.
    case template(BodyTemplate)

    /// Bytes before the first record.
    var header: [UInt8] {
        switch self {
        case .jsonArray: Array(PositionFormat.jsonArray.header.utf8)
        case .jsonl: []
        case .geojson: Array(PositionFormat.geojson.header.utf8)
        case .template(let t): t.prefix
        }
    }

    var separator: [UInt8] {
        switch self {
        case .jsonArray, .template: [UInt8(ascii: ",")]
        case .jsonl: []
        case .geojson: Array(PositionFormat.geojson.separator.utf8)
        }
    }

    var trailer: [UInt8] {
        switch self {
        case .jsonArray: Array(PositionFormat.jsonArray.trailer.utf8)
        case .jsonl: []
        case .geojson: Array(PositionFormat.geojson.trailer.utf8)
        case .template(let t): t.suffix
        }
    }

    var contentType: String {
        switch self {
        case .jsonl: "application/x-ndjson"
        case .geojson: "application/geo+json"
        default: "application/json"
        }
    }

    /// True when a queued record's JSON is already the record's encoding (no decode needed).
    var usesStoredJSON: Bool {
        switch self {
        case .jsonArray, .jsonl: true
        case .geojson: false
        case .template(let t): t.fields == nil
        }
    }

    /// Appends one record (without separator).
    func appendRecord(storedJSON: [UInt8], position: Position?, to out: inout [UInt8]) {
        switch self {
        case .jsonArray:
            out.append(contentsOf: storedJSON)
        case .jsonl:
            out.append(contentsOf: storedJSON)
            out.append(10)
        case .geojson:
            if let position { PositionFormat.geojson.appendRecord(position, to: &out) }
        case .template(let t):
            if let fields = t.fields, let position {
                FieldMapping.appendObject(fields, position, to: &out)
            } else {
                out.append(contentsOf: storedJSON)
            }
        }
    }
}

/// The `template` body: the user's document split around the `"$positions"` placeholder.
public struct BodyTemplate: Sendable {
    /// Everything before the records (`{"vipId":"42","list":[`).
    var prefix: [UInt8]
    /// Everything after them (`]}`).
    var suffix: [UInt8]
    /// Output fields in order; nil writes whole position objects.
    var fields: [FieldMapping]?

    /// The string value in a template that stands for the array of records.
    static let placeholder = "$positions"
}

/// One output field of a template record: a name and where its value comes from.
public struct FieldMapping: Sendable {
    enum Value: Sendable {
        /// Encoded JSON written as is.
        case constant([UInt8])
        case field(PositionField, scale: Double?, decimals: Int?)
        case time(TimeFormat)
    }

    /// The quoted, escaped key followed by `:`.
    var key: [UInt8]
    var value: Value

    init(name: String, value: Value) {
        var k: [UInt8] = []
        JSONWriter.appendString(name, to: &k)
        k.append(UInt8(ascii: ":"))
        self.key = k
        self.value = value
    }

    /// Appends `{…}` for one position; fields without a value are left out.
    static func appendObject(_ fields: [FieldMapping], _ p: Position, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for f in fields {
            let mark = out.count
            if !first { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: f.key)
            if f.appendValue(p, to: &out) {
                first = false
            } else {
                out.removeLast(out.count - mark)
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    private func appendValue(_ p: Position, to out: inout [UInt8]) -> Bool {
        switch value {
        case .constant(let bytes):
            out.append(contentsOf: bytes)
            return true
        case .time(let format):
            guard let t = p.time else { return false }
            format.append(t, to: &out)
            return true
        case .field(let field, let scale, let decimals):
            switch field.value(of: p) {
            case nil: return false
            case .text(let s)?: JSONWriter.appendString(s, to: &out)
            case .integer(let n)?:
                if let scale {
                    appendNumber(Double(n) * scale, decimals, to: &out)
                } else {
                    JSONWriter.appendInt(Int64(n), to: &out)
                }
            case .number(let v, let natural)?:
                appendNumber(v * (scale ?? 1), decimals ?? (scale == nil ? natural : 6), to: &out)
            }
            return true
        }
    }

    private func appendNumber(_ v: Double, _ decimals: Int?, to out: inout [UInt8]) {
        if let decimals { JSONWriter.appendNumber(v, decimals: decimals, to: &out) } else { JSONWriter.appendNumber(v, to: &out) }
    }
}

/// A position value a template can map, named as in ``PositionJSON``.
public enum PositionField: Sendable, Equatable {
    case id, source, device, mode, status, lat, lon, altMSL, speed, track, heading, uSat
    case hdop, vdop, pdop, eph, epv, datum, x, y, event, fence
    case attribute(String)

    /// The names accepted in `from` (besides `time` and `attributes.KEY`).
    static let names: [String: PositionField] = [
        "id": .id, "source": .source, "device": .device, "mode": .mode, "status": .status,
        "lat": .lat, "lon": .lon, "altMSL": .altMSL, "speed": .speed, "track": .track, "heading": .heading,
        "uSat": .uSat, "hdop": .hdop, "vdop": .vdop, "pdop": .pdop, "eph": .eph, "epv": .epv,
        "datum": .datum, "x": .x, "y": .y, "event": .event, "fence": .fence,
    ]

    enum FieldValue {
        case text(String)
        case integer(Int)
        /// A measurement with the decimals ``PositionJSON`` writes it with.
        case number(Double, natural: Int)
    }

    func value(of p: Position) -> FieldValue? {
        func num(_ v: Double?, _ d: Int) -> FieldValue? { v.map { .number($0, natural: d) } }
        switch self {
        case .id: return .text(p.id)
        case .source: return .text(p.source)
        case .device: return p.device.map { .text($0) }
        case .mode: return .integer(p.mode.rawValue)
        case .status: return p.quality.map { .integer($0.rawValue) }
        case .lat: return num(p.latitude, 9)
        case .lon: return num(p.longitude, 9)
        case .altMSL: return num(p.altitude, 3)
        case .speed: return num(p.speed, 3)
        case .track: return num(p.course, 3)
        case .heading: return num(p.heading, 3)
        case .uSat: return p.satellites.map { .integer($0) }
        case .hdop: return num(p.hdop, 2)
        case .vdop: return num(p.vdop, 2)
        case .pdop: return num(p.pdop, 2)
        case .eph: return num(p.horizontalError, 3)
        case .epv: return num(p.verticalError, 3)
        case .datum: return .text(p.datum.name)
        case .x: return num(p.x, 3)
        case .y: return num(p.y, 3)
        case .event: return p.event.map { .text($0.kind.rawValue) }
        case .fence: return p.event.map { .text($0.fenceId) }
        case .attribute(let key): return p.attributes[key].map { .text($0) }
        }
    }
}

/// How a template writes a position's time.
public enum TimeFormat: Sendable {
    /// `"2024-05-01T10:00:00.000Z"`.
    case iso8601
    /// Whole seconds since 1970 (a number).
    case epochSeconds
    /// Milliseconds since 1970 (a number).
    case epochMilliseconds
    /// A pattern such as `yyyy-MM-dd HH:mm:ss` in a zone (a string).
    case pattern(TimePattern)

    func append(_ t: Timestamp, to out: inout [UInt8]) {
        switch self {
        case .iso8601:
            out.append(UInt8(ascii: "\""))
            t.appendISO8601(to: &out)
            out.append(UInt8(ascii: "\""))
        case .epochSeconds:
            // Floor, so 10:00:00.900 is still 10:00:00 as in the pattern form.
            let ms = t.milliseconds
            JSONWriter.appendInt(ms >= 0 ? ms / 1000 : (ms - 999) / 1000, to: &out)
        case .epochMilliseconds:
            JSONWriter.appendInt(t.milliseconds, to: &out)
        case .pattern(let p):
            out.append(UInt8(ascii: "\""))
            p.append(t, to: &out)
            out.append(UInt8(ascii: "\""))
        }
    }
}

/// A compiled date pattern: `yyyy yy MM dd HH mm ss SSS XXX` and literal text (`'…'` quotes letters).
///
/// Formats by arithmetic on the timestamp (no `DateFormatter` per position); the zone's offset is
/// looked up once per UTC hour and cached.
public final class TimePattern: Sendable {
    enum Token: Sendable, Equatable {
        case year4, year2, month, day, hour, minute, second, millis, offset
        case literal([UInt8])
    }

    let tokens: [Token]
    let zone: TimeZone
    /// Fixed offset in seconds when the zone has no daylight saving rules worth looking up.
    private let fixedOffset: Int?
    private let cache = Mutex<(hour: Int64, offset: Int)>((Int64.min, 0))

    /// Compiles `pattern`; nil with a reason when it has letters that are not fields.
    init(pattern: String, zone: TimeZone) throws(PatternError) {
        self.tokens = try TimePattern.compile(pattern)
        self.zone = zone
        self.fixedOffset = zone.identifier == "GMT" || zone.identifier == "UTC" ? 0 : nil
    }

    struct PatternError: Error { var message: String }

    static func compile(_ pattern: String) throws(PatternError) -> [Token] {
        var tokens: [Token] = []
        let chars = Array(pattern.utf8)
        var i = 0
        var literal: [UInt8] = []
        func flush() { if !literal.isEmpty { tokens.append(.literal(literal)); literal = [] } }
        while i < chars.count {
            let c = chars[i]
            if c == UInt8(ascii: "'") {
                i += 1
                while i < chars.count, chars[i] != UInt8(ascii: "'") { literal.append(chars[i]); i += 1 }
                i += 1
                continue
            }
            let isLetter = (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
            guard isLetter else { literal.append(c); i += 1; continue }
            var n = 1
            while i + n < chars.count, chars[i + n] == c { n += 1 }
            let run = String(decoding: chars[i..<(i + n)], as: UTF8.self)
            let token: Token
            switch run {
            case "yyyy": token = .year4
            case "yy": token = .year2
            case "MM": token = .month
            case "dd": token = .day
            case "HH": token = .hour
            case "mm": token = .minute
            case "ss": token = .second
            case "SSS": token = .millis
            case "XXX": token = .offset
            default:
                throw PatternError(message: "unsupported field \"\(run)\" (use yyyy, yy, MM, dd, HH, mm, ss, SSS, XXX; quote text with '…')")
            }
            flush()
            tokens.append(token)
            i += n
        }
        flush()
        return tokens
    }

    private func offsetSeconds(at t: Timestamp) -> Int {
        if let fixedOffset { return fixedOffset }
        let hour = t.milliseconds >= 0 ? t.milliseconds / 3_600_000 : (t.milliseconds - 3_599_999) / 3_600_000
        if let cached = cache.withLock({ $0.hour == hour ? $0.offset : nil }) { return cached }
        let offset = zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(hour) * 3600))
        cache.withLock { $0 = (hour, offset) }
        return offset
    }

    func append(_ t: Timestamp, to out: inout [UInt8]) {
        let offset = offsetSeconds(at: t)
        let c = Timestamp(milliseconds: t.milliseconds + Int64(offset) * 1000).components
        @inline(__always) func two(_ v: Int) { out.append(UInt8(48 + v / 10 % 10)); out.append(UInt8(48 + v % 10)) }
        for token in tokens {
            switch token {
            case .year4:
                let y = max(0, min(9999, c.year))
                two(y / 100); two(y % 100)
            case .year2: two(c.year % 100)
            case .month: two(c.month)
            case .day: two(c.day)
            case .hour: two(c.hour)
            case .minute: two(c.minute)
            case .second: two(c.second)
            case .millis: out.append(UInt8(48 + c.millisecond / 100)); two(c.millisecond % 100)
            case .offset:
                if offset == 0 { out.append(UInt8(ascii: "Z")); continue }
                out.append(offset < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
                let m = abs(offset) / 60
                two(m / 60); out.append(UInt8(ascii: ":")); two(m % 60)
            case .literal(let bytes):
                for b in bytes {
                    // Literal text sits inside a JSON string.
                    if b == 0x22 || b == 0x5C { out.append(0x5C) }
                    out.append(b)
                }
            }
        }
    }
}
