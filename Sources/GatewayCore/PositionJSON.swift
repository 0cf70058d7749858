/// The JSON form of a ``Position``: gpsd TPV field names where gpsd has one.
///
/// One object per position, e.g.
/// `{"class":"TPV","id":"rx-1584538100600","source":"rx","device":"/dev/ttyACM0",
///   "time":"2020-03-18T13:28:20.600Z","mode":3,"status":2,"lat":41.574970205,"lon":-93.750558641,
///   "altMSL":278.02,"speed":1.673,"track":92.308,"uSat":9,"hdop":1,"eph":4.75,"datum":"wgs84"}`.
/// Absent values are omitted. This is the schema of the file sink's `jsonl`, the stdout sink, the
/// `jsonl` replay format and the `exec` source's JSON Lines input.
public enum PositionJSON {
    /// Field names, in output order, with what they hold — the documented schema.
    public static let fields: [(name: String, meaning: String)] = [
        ("class", "always \"TPV\" (optional on input)"),
        ("id", "stable unique id, the idempotency key (generated on input when absent)"),
        ("source", "id of the component that produced the position"),
        ("device", "device id (serial number, device path, configured id)"),
        ("time", "ISO 8601 UTC with milliseconds and Z; numbers are read as epoch seconds"),
        ("mode", "0 unknown, 1 no fix, 2 2D, 3 3D"),
        ("status", "gpsd status: 1 GPS, 2 DGPS, 3 RTK fixed, 4 RTK float, 5 dead reckoning, 6 GNSS+DR, 7 manual, 8 simulated, 9 P(Y)"),
        ("lat", "latitude, degrees, in datum"),
        ("lon", "longitude, degrees, in datum"),
        ("altMSL", "altitude above mean sea level, metres"),
        ("speed", "speed over ground, m/s"),
        ("track", "course over ground, degrees true"),
        ("heading", "vehicle heading, degrees true (HDT/THS)"),
        ("uSat", "satellites used in the fix"),
        ("hdop", "horizontal dilution of precision"),
        ("vdop", "vertical dilution of precision"),
        ("pdop", "position dilution of precision"),
        ("eph", "horizontal error, metres (1-sigma)"),
        ("epv", "vertical error, metres (1-sigma)"),
        ("datum", "wgs84, gcj02, bd09 or EPSG:<code>; default wgs84"),
        ("x", "easting, metres, when datum is a projected CRS"),
        ("y", "northing, metres, when datum is a projected CRS"),
        ("attributes", "object of string values (geofence names, static tags)"),
        ("event", "geofence transition {\"type\":\"enter|exit|dwell\",\"fence\":ID,\"name\":NAME} or receiver health {\"type\":\"fix_lost|fix_regained|no_data|data_resumed|antenna\",\"status\":\"ok|open|short\" (antenna only)}"),
    ]

    /// Remembers the last attributes written and their JSON text.
    ///
    /// Consecutive positions usually carry the same attributes (the geofence and set transforms
    /// hand one shared dictionary to every position they change), and sorting and writing them
    /// costs more than the rest of the object. A sink that writes many positions keeps one cache
    /// and passes it to ``PositionJSON/append(_:to:cache:)``.
    public struct AttributeCache: Sendable {
        /// False for ``none``: a single record has nothing to share its text with.
        fileprivate let remembers: Bool
        fileprivate var attributes: [String: String] = [:]
        fileprivate var text: [UInt8] = []
        /// Where each object is written before its one copy to the output, kept from record to
        /// record: the room an object may need is over a kilobyte, which is more than a
        /// temporary allocation takes on the stack, so a fresh buffer would be a heap
        /// allocation per record.
        fileprivate var scratch: [UInt8] = []

        public init() { remembers = true }
        private init(remembers: Bool) { self.remembers = remembers }

        /// A cache that keeps nothing, for one record on its own.
        public static var none: AttributeCache { AttributeCache(remembers: false) }
    }

    /// Appends the JSON object for `p` (no trailing newline).
    public static func append(_ p: Position, to out: inout [UInt8]) {
        var none = AttributeCache.none
        append(p, to: &out, cache: &none)
    }

    /// Appends the JSON object for `p` (no trailing newline), taking the attributes' text from
    /// `cache` when they are those of the position before.
    public static func append(_ p: Position, to out: inout [UInt8], cache: inout AttributeCache) {
        // The object has a known maximum size: it is written into the cache's scratch buffer and
        // appended with one copy (this runs once per position per sink).
        var room = 1200 + RawJSONWriter.maxLength(of: p.identifier) + RawJSONWriter.maxStringLength(p.source)
            + RawJSONWriter.maxStringLength(p.datum.name)
        if let d = p.device { room += RawJSONWriter.maxStringLength(d) }
        let attributes = p.attributes
        let cached = cache.remembers && !attributes.isEmpty && !cache.text.isEmpty && cache.attributes == attributes
        if cached {
            room += cache.text.count
        } else {
            room += 16
            for (k, v) in attributes { room += RawJSONWriter.maxStringLength(k) + RawJSONWriter.maxStringLength(v) + 2 }
        }
        let event = p.event
        if let e = event {
            room += 64 + RawJSONWriter.maxStringLength(e.fenceId ?? "") + RawJSONWriter.maxStringLength(e.fenceName ?? "")
                + RawJSONWriter.maxStringLength(e.status ?? "")
        }
        var scratch: [UInt8] = []
        swap(&scratch, &cache.scratch)
        defer { swap(&scratch, &cache.scratch) }
        if scratch.count < room { scratch = [UInt8](repeating: 0, count: room) }
        scratch.withUnsafeMutableBufferPointer { buf in
            guard let base = buf.baseAddress else { return }
            var w = RawJSONWriter(base)
            appendScalars(p, to: &w)
            if cached {
                cache.text.withUnsafeBufferPointer { w.bytes($0) }
            } else if !attributes.isEmpty {
                let start = w.count
                appendAttributes(attributes, to: &w)
                if cache.remembers {
                    cache.attributes = attributes
                    cache.text = Array(UnsafeBufferPointer(start: base + start, count: w.count - start))
                }
            }
            if let e = event {
                w.bytes(#","event":{"type":"#)
                w.string(e.kind.rawValue)
                if let f = e.fenceId { w.bytes(#","fence":"#); w.string(f) }
                if let n = e.fenceName { w.bytes(#","name":"#); w.string(n) }
                if let st = e.status { w.bytes(#","status":"#); w.string(st) }
                w.byte(UInt8(ascii: "}"))
            }
            w.byte(UInt8(ascii: "}"))
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: w.count))
        }
    }

    /// `,"attributes":{…}` with the keys in order.
    private static func appendAttributes(_ attributes: [String: String], to w: inout RawJSONWriter) {
        w.bytes(#","attributes":{"#)
        if attributes.count == 1, let (k, v) = attributes.first {
            w.string(k); w.byte(UInt8(ascii: ":")); w.string(v)
        } else {
            // Sorted in a stack buffer: no array of keys and no lookups per position.
            withUnsafeTemporaryAllocation(of: (key: String, value: String).self, capacity: attributes.count) { buf in
                let (_, n) = buf.initialize(from: attributes)
                var pairs = UnsafeMutableBufferPointer(rebasing: buf[0..<n])
                pairs.sort { $0.key < $1.key }
                for i in pairs.indices {
                    if i > 0 { w.byte(UInt8(ascii: ",")) }
                    w.string(pairs[i].key)
                    w.byte(UInt8(ascii: ":"))
                    w.string(pairs[i].value)
                }
                _ = pairs.deinitialize()
            }
        }
        w.byte(UInt8(ascii: "}"))
    }

    /// Writes the object from `{` up to the last scalar member (`y`), without closing it.
    private static func appendScalars(_ p: Position, to writer: inout RawJSONWriter) {
        // A local copy whose address no call sees: its count stays in a register instead of
        // being stored to the caller's writer after every byte.
        var w = writer
        defer { writer = w }
        w.bytes(#"{"class":"TPV","id":"#)
        w.string(p.identifier)
        if !p.source.isEmpty { w.bytes(#","source":"#); w.string(p.source) }
        if let d = p.device { w.bytes(#","device":"#); w.string(d) }
        if let t = p.time {
            // The text of `Timestamp.appendISO8601(to:)`: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
            let c = t.components
            w.bytes(#","time":""#)
            let y = max(0, min(9999, c.year))
            w.twoDigits(y / 100); w.twoDigits(y % 100)
            w.byte(UInt8(ascii: "-")); w.twoDigits(c.month); w.byte(UInt8(ascii: "-")); w.twoDigits(c.day)
            w.byte(UInt8(ascii: "T")); w.twoDigits(c.hour); w.byte(UInt8(ascii: ":")); w.twoDigits(c.minute)
            w.byte(UInt8(ascii: ":")); w.twoDigits(c.second); w.byte(UInt8(ascii: "."))
            w.byte(UInt8(truncatingIfNeeded: 48 + c.millisecond / 100)); w.twoDigits(c.millisecond % 100)
            w.bytes(#"Z""#)
        }
        w.bytes(#","mode":"#); w.int(Int64(p.mode.rawValue))
        if let q = p.quality { w.bytes(#","status":"#); w.int(Int64(q.rawValue)) }
        if let v = p.latitude { w.bytes(#","lat":"#); w.number(v, NineDecimals.self) }
        if let v = p.longitude { w.bytes(#","lon":"#); w.number(v, NineDecimals.self) }
        if let v = p.altitude { w.bytes(#","altMSL":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.speed { w.bytes(#","speed":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.course { w.bytes(#","track":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.heading { w.bytes(#","heading":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.satellites { w.bytes(#","uSat":"#); w.int(Int64(v)) }
        if let v = p.hdop { w.bytes(#","hdop":"#); w.number(v, TwoDecimals.self) }
        if let v = p.vdop { w.bytes(#","vdop":"#); w.number(v, TwoDecimals.self) }
        if let v = p.pdop { w.bytes(#","pdop":"#); w.number(v, TwoDecimals.self) }
        if let v = p.horizontalError { w.bytes(#","eph":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.verticalError { w.bytes(#","epv":"#); w.number(v, ThreeDecimals.self) }
        w.bytes(#","datum":"#); w.string(p.datum.name)
        if let v = p.x { w.bytes(#","x":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.y { w.bytes(#","y":"#); w.number(v, ThreeDecimals.self) }
    }

    /// The JSON text of one position.
    public static func string(_ p: Position) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        append(p, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Why a JSON object is not a position.
    public struct DecodeError: Error, Sendable, CustomStringConvertible {
        public var field: String
        public var problem: String
        public var description: String { "\(field): \(problem)" }
    }

    /// Reads a position from a parsed JSON object in this schema.
    ///
    /// `source` fills `source` when the object has none; the caller supplies an id when the object
    /// has none (`makeID`), so ids stay deterministic per input.
    public static func decode(_ value: JSONValue, source: String, makeID: (Position) -> String) throws(DecodeError) -> Position {
        guard case .object(let o) = value else { throw DecodeError(field: "$", problem: "expected an object, got \(value.kindName)") }
        if let c = o["class"], c != .string("TPV") {
            throw DecodeError(field: "class", problem: "expected \"TPV\", got \(c.jsonText)")
        }
        func number(_ k: String) throws(DecodeError) -> Double? {
            guard let v = o[k] else { return nil }
            switch v {
            case .null: return nil
            case .number(let n): return n
            default: throw DecodeError(field: k, problem: "expected a number, got \(v.kindName)")
            }
        }
        func string(_ k: String) throws(DecodeError) -> String? {
            guard let v = o[k] else { return nil }
            switch v {
            case .null: return nil
            case .string(let s): return s
            default: throw DecodeError(field: k, problem: "expected a string, got \(v.kindName)")
            }
        }
        var p = Position()
        switch o["time"] {
        case nil, .null?: break
        case .string(let s)?:
            guard let t = Timestamp(iso8601: s) else { throw DecodeError(field: "time", problem: "not an ISO 8601 time: \"\(s)\"") }
            p.time = t
        case .number(let n)?:
            guard let t = Timestamp(epochSeconds: n) else { throw DecodeError(field: "time", problem: "not a time in epoch seconds: \(n)") }
            p.time = t
        case let v?: throw DecodeError(field: "time", problem: "expected a string, got \(v.kindName)")
        }
        p.latitude = try number("lat")
        p.longitude = try number("lon")
        if let lat = p.latitude, !(-90...90).contains(lat) { throw DecodeError(field: "lat", problem: "out of range: \(lat)") }
        if let lon = p.longitude, !(-180...180).contains(lon) { throw DecodeError(field: "lon", problem: "out of range: \(lon)") }
        if (p.latitude == nil) != (p.longitude == nil) {
            throw DecodeError(field: p.latitude == nil ? "lat" : "lon", problem: "lat and lon must come together")
        }
        if let m = try number("mode") {
            guard abs(m) < 1e6, let mode = FixMode(rawValue: Int(m)), Double(mode.rawValue) == m else {
                throw DecodeError(field: "mode", problem: "expected 0, 1, 2 or 3, got \(m)")
            }
            p.mode = mode
        } else {
            p.mode = p.hasCoordinates ? .twoD : .noFix
        }
        if let s = try number("status") {
            guard abs(s) < 1e6, s == s.rounded(), let q = FixQuality(rawValue: Int(s)) else { throw DecodeError(field: "status", problem: "expected 0...9, got \(s)") }
            p.quality = q
        }
        p.altitude = try number("altMSL")
        if p.altitude == nil { p.altitude = try number("alt") }
        p.speed = try number("speed")
        p.course = try number("track")
        p.heading = try number("heading")
        if let u = try number("uSat") {
            guard u >= 0, u < 1000, u == u.rounded() else { throw DecodeError(field: "uSat", problem: "expected a satellite count, got \(u)") }
            p.satellites = Int(u)
        }
        p.hdop = try number("hdop")
        p.vdop = try number("vdop")
        p.pdop = try number("pdop")
        p.horizontalError = try number("eph")
        p.verticalError = try number("epv")
        if let d = try string("datum") {
            guard let datum = Datum(parsing: d) else { throw DecodeError(field: "datum", problem: "unknown datum \"\(d)\"") }
            p.datum = datum
        }
        p.x = try number("x")
        p.y = try number("y")
        p.source = try string("source") ?? source
        p.device = try string("device")
        if let a = o["attributes"], a != .null {
            guard case .object(let attrs) = a else { throw DecodeError(field: "attributes", problem: "expected an object, got \(a.kindName)") }
            for m in attrs {
                guard let text = m.value.scalarText else {
                    throw DecodeError(field: "attributes.\(m.key)", problem: "expected a string, got \(m.value.kindName)")
                }
                p.attributes[m.key] = text
            }
        }
        if let e = o["event"], e != .null {
            guard case .object(let eo) = e, case .string(let k)? = eo["type"], let kind = PositionEvent.Kind(rawValue: k) else {
                throw DecodeError(field: "event", problem: "expected {\"type\":\"enter|exit|dwell|fix_lost|fix_regained|no_data|data_resumed|antenna\", …}")
            }
            let fence = eo["fence"]?.stringValue
            if kind.isFence && fence == nil {
                throw DecodeError(field: "event.fence", problem: "a \(k) event needs the fence id")
            }
            p.event = PositionEvent(kind: kind, fenceId: fence, fenceName: eo["name"]?.stringValue, status: eo["status"]?.stringValue)
        }
        p.id = try string("id") ?? makeID(p)
        return p
    }
}
