import GatewayCore

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
        ("id", "stable unique id, the idempotency key (generated on input when absent or empty)"),
        ("source", "id of the component that produced the position"),
        ("device", "device id (serial number, device path, configured id)"),
        ("time", "ISO 8601 UTC with milliseconds and Z; numbers are read as epoch seconds"),
        ("mode", "0 unknown, 1 no fix, 2 2D, 3 3D"),
        ("status", "gpsd status: 1 GPS, 2 DGPS, 3 RTK fixed, 4 RTK float, 5 dead reckoning, 6 GNSS+DR, 7 manual, 8 simulated, 9 P(Y)"),
        ("lat", "latitude, degrees, in datum"),
        ("lon", "longitude, degrees, in datum"),
        ("altMSL", "altitude above mean sea level, metres"),
        ("altHAE", "height above the WGS84 ellipsoid, metres (UBX NAV-PVT)"),
        ("speed", "speed over ground, m/s"),
        ("track", "course over ground, degrees true"),
        ("heading", "vehicle heading, degrees true (HDT/THS)"),
        ("uSat", "satellites used in the fix"),
        ("hdop", "horizontal dilution of precision"),
        ("vdop", "vertical dilution of precision"),
        ("pdop", "position dilution of precision"),
        ("eph", "horizontal error, metres (1-sigma)"),
        ("epv", "vertical error, metres (1-sigma)"),
        ("eps", "speed accuracy estimate, m/s (UBX NAV-PVT sAcc)"),
        ("epd", "course accuracy estimate, degrees (UBX NAV-PVT headAcc)"),
        ("dgpsAge", "age of the differential corrections in use, seconds (UBX NAV-PVT: the upper bound of lastCorrectionAge's range)"),
        ("datum", "wgs84, gcj02, bd09 or EPSG:<code>; default wgs84"),
        ("x", "easting, metres, when datum is a projected CRS"),
        ("y", "northing, metres, when datum is a projected CRS"),
        ("attributes", "object of string values (geofence names, static tags)"),
        ("event", "geofence transition {\"type\":\"enter|exit|dwell\",\"fence\":ID,\"name\":NAME}, receiver health {\"type\":\"fix_lost|fix_regained|no_data|data_resumed|antenna|jamming|spoofing|rtk_fixed|rtk_float|rtk_lost\",\"status\":\"ok|open|short\" (antenna), \"ok|warning|critical\" (jamming), \"none|indicated|multiple\" (spoofing)} or motion {\"type\":\"trip_start|trip_end|stop_start|stop_end|ignition_on|ignition_off|overspeed|idle\"} (details in attributes)"),
    ]

    /// Remembers the text of what a sink writes again and again: the last attributes written,
    /// the source's name and id prefix, the device, the datum and the date.
    ///
    /// Consecutive positions usually carry the same attributes (the geofence and set transforms
    /// hand one shared dictionary to every position they change), and sorting and writing them
    /// costs more than the rest of the object; a source's positions share their source, id
    /// prefix, device, datum and day, whose text is checked for escapes (or computed from the day
    /// number) every time otherwise. A sink that writes many positions keeps one cache and
    /// passes it to ``PositionJSON/append(_:to:cache:)``.
    public struct TextCache: Sendable {
        /// False for ``none``: a single record has nothing to share its text with.
        fileprivate let remembers: Bool
        fileprivate var attributes: [String: String] = [:]
        fileprivate var text: [UInt8] = []
        /// `"prefix` (the quote opened: the number follows), `"source"`, `"device"` and `"datum"`.
        fileprivate var idPrefix = StringText(closed: false)
        fileprivate var source = StringText(closed: true)
        fileprivate var device = StringText(closed: true)
        fileprivate var datum = StringText(closed: true)
        fileprivate var date = DateText()
        /// Where each object is written before its one copy to the output, kept from record to
        /// record: the room an object may need is over a kilobyte, which is more than a
        /// temporary allocation takes on the stack, so a fresh buffer would be a heap
        /// allocation per record.
        fileprivate var scratch: [UInt8] = []

        public init() { remembers = true }
        private init(remembers: Bool) { self.remembers = remembers }

        /// A cache that keeps nothing, for one record on its own.
        public static var none: TextCache { TextCache(remembers: false) }
    }

    /// A string and its text as a JSON string (quoted, or only opened when `closed` is false).
    fileprivate struct StringText: Sendable {
        let closed: Bool
        private var string = ""
        private var text: [UInt8]

        init(closed: Bool) {
            self.closed = closed
            text = closed ? [0x22, 0x22] : [0x22]
        }

        /// Writes the text of `s`: the one remembered when `s` is the same string (for the
        /// same small or shared string, one comparison of its two words).
        @inline(__always)
        mutating func write(_ s: String, to w: inout RawJSONWriter) {
            if s != string { remember(s) }
            text.withUnsafeBufferPointer { w.bytes($0) }
        }

        @inline(never)
        private mutating func remember(_ s: String) {
            string = s
            text = [UInt8](repeating: 0, count: RawJSONWriter.maxStringLength(s))
            let n = text.withUnsafeMutableBufferPointer { buf in
                var w = RawJSONWriter(buf.baseAddress!)
                w.string(s)
                return closed ? w.count : w.count - 1
            }
            text.removeSubrange(n...)
        }
    }

    /// A day (days since 1970) and its text `YYYY-MM-DDT`.
    fileprivate struct DateText: Sendable {
        private var day = Int.min
        private var text: [UInt8] = []

        /// Writes the date of `day`: the one remembered when it is the same day.
        @inline(__always)
        mutating func write(_ day: Int, to w: inout RawJSONWriter) {
            if day != self.day { remember(day) }
            text.withUnsafeBufferPointer { w.bytes($0) }
        }

        @inline(never)
        private mutating func remember(_ day: Int) {
            self.day = day
            text = [UInt8](repeating: 0, count: 11)
            text.withUnsafeMutableBufferPointer { buf in
                var w = RawJSONWriter(buf.baseAddress!)
                w.date(day)
            }
        }
    }

    /// Appends the JSON object for `p` (no trailing newline).
    public static func append(_ p: Position, to out: inout [UInt8]) {
        var none = TextCache.none
        append(p, to: &out, cache: &none)
    }

    /// Appends the JSON object for `p` (no trailing newline), taking the attributes' text from
    /// `cache` when they are those of the position before.
    public static func append(_ p: Position, to out: inout [UInt8], cache: inout TextCache) {
        withUnsafePointer(to: p) { append(at: $0, to: &out, cache: &cache) }
    }

    /// ``append(_:to:cache:)`` for the position at `p`, read where it is: a sink writing
    /// a batch passes its elements this way, as passing one by value copies it.
    static func append(at p: UnsafePointer<Position>, to out: inout [UInt8], cache: inout TextCache) {
        // The object has a known maximum size: it is written into the cache's scratch buffer and
        // appended with one copy (this runs once per position per sink).
        var room = 1200 + RawJSONWriter.maxLength(of: p.pointee.identifier) + RawJSONWriter.maxStringLength(p.pointee.source)
            + RawJSONWriter.maxStringLength(p.pointee.datum.name)
        if let d = p.pointee.device { room += RawJSONWriter.maxStringLength(d) }
        // altHAE, eps, epd, dgpsAge: a key and a number of at most 25 characters each.
        if p.pointee.detail != nil { room += 4 * 40 }
        let attributes = p.pointee.attributes
        let cached = cache.remembers && !attributes.isEmpty && !cache.text.isEmpty && cache.attributes == attributes
        if cached {
            room += cache.text.count
        } else {
            room += 16
            for (k, v) in attributes { room += RawJSONWriter.maxStringLength(k) + RawJSONWriter.maxStringLength(v) + 2 }
        }
        let event = p.pointee.event
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
            appendScalars(p, to: &w, cache: &cache)
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
    private static func appendScalars(_ p: UnsafePointer<Position>, to writer: inout RawJSONWriter,
                                      cache: inout TextCache) {
        // A local copy whose address no call sees: its count stays in a register instead of
        // being stored to the caller's writer after every byte.
        var w = writer
        defer { writer = w }
        let remembers = cache.remembers
        w.bytes(#"{"class":"TPV","id":"#)
        if remembers, let id = p.pointee.identifier.numberedParts {
            cache.idPrefix.write(id.prefix, to: &w)
            if id.marker != 0 { w.byte(id.marker) }
            w.int(id.number)
            w.byte(0x22)
        } else {
            w.string(p.pointee.identifier)
        }
        if !p.pointee.source.isEmpty {
            w.bytes(#","source":"#)
            if remembers { cache.source.write(p.pointee.source, to: &w) } else { w.string(p.pointee.source) }
        }
        if let d = p.pointee.device {
            w.bytes(#","device":"#)
            if remembers { cache.device.write(d, to: &w) } else { w.string(d) }
        }
        if let t = p.pointee.time {
            // The text of `Timestamp.appendISO8601(to:)`: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
            let (day, ms) = t.dayAndTimeOfDay
            w.bytes(#","time":""#)
            if remembers { cache.date.write(day, to: &w) } else { w.date(day) }
            let seconds = ms / 1000
            w.twoDigits(seconds / 3600); w.byte(UInt8(ascii: ":")); w.twoDigits(seconds / 60 % 60)
            w.byte(UInt8(ascii: ":")); w.twoDigits(seconds % 60); w.byte(UInt8(ascii: "."))
            let fraction = ms % 1000
            w.byte(UInt8(truncatingIfNeeded: 48 + fraction / 100)); w.twoDigits(fraction % 100)
            w.bytes(#"Z""#)
        }
        w.bytes(#","mode":"#); w.int(Int64(p.pointee.mode.rawValue))
        if let q = p.pointee.quality { w.bytes(#","status":"#); w.int(Int64(q.rawValue)) }
        if let v = p.pointee.latitude { w.bytes(#","lat":"#); w.number(v, NineDecimals.self) }
        if let v = p.pointee.longitude { w.bytes(#","lon":"#); w.number(v, NineDecimals.self) }
        if let v = p.pointee.altitude { w.bytes(#","altMSL":"#); w.number(v, ThreeDecimals.self) }
        let detail = p.pointee.detail
        if let v = detail?.ellipsoidHeight { w.bytes(#","altHAE":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.pointee.speed { w.bytes(#","speed":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.pointee.course { w.bytes(#","track":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.pointee.heading { w.bytes(#","heading":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.pointee.satellites { w.bytes(#","uSat":"#); w.int(Int64(v)) }
        if let v = p.pointee.hdop { w.bytes(#","hdop":"#); w.number(v, TwoDecimals.self) }
        if let v = p.pointee.vdop { w.bytes(#","vdop":"#); w.number(v, TwoDecimals.self) }
        if let v = p.pointee.pdop { w.bytes(#","pdop":"#); w.number(v, TwoDecimals.self) }
        if let v = p.pointee.horizontalError { w.bytes(#","eph":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.pointee.verticalError { w.bytes(#","epv":"#); w.number(v, ThreeDecimals.self) }
        if let detail {
            if let v = detail.speedError { w.bytes(#","eps":"#); w.number(v, ThreeDecimals.self) }
            if let v = detail.courseError { w.bytes(#","epd":"#); w.number(v, FiveDecimals.self) }
            if let v = detail.correctionAge { w.bytes(#","dgpsAge":"#); w.number(v, ThreeDecimals.self) }
        }
        w.bytes(#","datum":"#)
        if remembers { cache.datum.write(p.pointee.datum.name, to: &w) } else { w.string(p.pointee.datum.name) }
        if let v = p.pointee.x { w.bytes(#","x":"#); w.number(v, ThreeDecimals.self) }
        if let v = p.pointee.y { w.bytes(#","y":"#); w.number(v, ThreeDecimals.self) }
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
            guard u >= 0, u <= Double(Position.maximumSatellites), u == u.rounded() else { throw DecodeError(field: "uSat", problem: "expected a satellite count, got \(u)") }
            p.satellites = Int(u)
        }
        p.hdop = try number("hdop")
        p.vdop = try number("vdop")
        p.pdop = try number("pdop")
        p.horizontalError = try number("eph")
        p.verticalError = try number("epv")
        p.detail = FixDetail(ellipsoidHeight: try number("altHAE"), speedError: try number("eps"),
                             courseError: try number("epd"), correctionAge: try number("dgpsAge"))
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
                throw DecodeError(field: "event", problem: "expected {\"type\":\"\(PositionEvent.Kind.allCases.map(\.rawValue).joined(separator: "|"))\", …}")
            }
            let fence = eo["fence"]?.stringValue
            if kind.isFence && fence == nil {
                throw DecodeError(field: "event.fence", problem: "a \(k) event needs the fence id")
            }
            p.event = PositionEvent(kind: kind, fenceId: fence, fenceName: eo["name"]?.stringValue, status: eo["status"]?.stringValue)
        }
        // An empty id is no id: kept, every such position would share one idempotency key
        // (found by Fuzz/MQTTMessages: a publisher's `"id":""` reached the sinks as it was).
        p.id = try string("id").flatMap { $0.isEmpty ? nil : $0 } ?? makeID(p)
        return p
    }
}
