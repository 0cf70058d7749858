import GatewayCore

/// Reads track, route and waypoint points from GPX 1.0 and 1.1 documents.
///
/// A small tolerant scanner rather than a full XML parser: it needs only elements, attributes and
/// text, handles namespace prefixes, comments, CDATA and missing namespaces, and never fails on
/// unknown content. Times before 1980 (such as the INT32_MIN sentinel some exporters write) are
/// treated as absent.
struct GPXReader {
    struct Point {
        var latitude: Double
        var longitude: Double
        var elevation: Double?
        var time: Timestamp?
        var satellites: Int?
        var hdop: Double?
        var vdop: Double?
        var pdop: Double?
        /// The geoid's height above the WGS84 ellipsoid (`geoidheight`), metres.
        var geoidHeight: Double?
        /// Seconds since the last DGPS update (`ageofdgpsdata`).
        var correctionAge: Double?
        var fix: String?
        var speed: Double?
        var course: Double?
    }

    /// Points of interest in document order, and how many point elements were unusable.
    static func read(_ bytes: [UInt8]) -> (points: [Point], skipped: Int) {
        var points: [Point] = []
        var skipped = 0
        var current: Point?
        var text: [UInt8] = []
        var i = 0
        let n = bytes.count
        // 1980-01-06, the GPS epoch: nothing a receiver logged is older.
        let earliest = Timestamp(year: 1980, month: 1, day: 6)

        func localName(_ raw: ArraySlice<UInt8>) -> String {
            let s = raw.lastIndex(of: UInt8(ascii: ":")).map { raw[($0 + 1)...] } ?? raw
            return String(decoding: s, as: UTF8.self).lowercased()
        }
        func attribute(_ name: String, in tag: ArraySlice<UInt8>) -> String? {
            // Finds name="value" or name='value' at a word boundary.
            let key = Array(name.utf8)
            var j = tag.startIndex
            while j + key.count + 2 <= tag.endIndex {
                if (j == tag.startIndex || tag[j - 1] == 32 || tag[j - 1] == 9 || tag[j - 1] == 10 || tag[j - 1] == 13),
                   tag[j..<(j + key.count)].elementsEqual(key) {
                    var k = j + key.count
                    while k < tag.endIndex, tag[k] == 32 { k += 1 }
                    if k < tag.endIndex, tag[k] == UInt8(ascii: "=") {
                        k += 1
                        while k < tag.endIndex, tag[k] == 32 { k += 1 }
                        if k < tag.endIndex, tag[k] == 34 || tag[k] == 39 {
                            let q = tag[k]
                            let start = k + 1
                            if let end = tag[start...].firstIndex(of: q) {
                                return String(decoding: tag[start..<end], as: UTF8.self)
                            }
                        }
                    }
                }
                j += 1
            }
            return nil
        }
        func textValue() -> String {
            var s = Substring(String(decoding: text, as: UTF8.self))
            while let f = s.first, f.isWhitespace { s.removeFirst() }
            while let l = s.last, l.isWhitespace { s.removeLast() }
            return String(s)
        }

        while i < n {
            guard bytes[i] == UInt8(ascii: "<") else {
                if current != nil { text.append(bytes[i]) }
                i += 1
                continue
            }
            // Comments, CDATA, processing instructions.
            if bytes[i...].starts(with: "<!--".utf8) {
                i = find("-->", in: bytes, from: i + 4).map { $0 + 3 } ?? n
                continue
            }
            if bytes[i...].starts(with: "<![CDATA[".utf8) {
                let end = find("]]>", in: bytes, from: i + 9) ?? n
                if current != nil { text.append(contentsOf: bytes[(i + 9)..<end]) }
                i = min(n, end + 3)
                continue
            }
            guard let close = bytes[i...].firstIndex(of: UInt8(ascii: ">")) else { break }
            let tag = bytes[(i + 1)..<close]
            i = close + 1
            guard let first = tag.first, first != UInt8(ascii: "?"), first != UInt8(ascii: "!") else { continue }
            let isEnd = first == UInt8(ascii: "/")
            let selfClosing = tag.last == UInt8(ascii: "/")
            let nameStart = isEnd ? tag.startIndex + 1 : tag.startIndex
            let nameEnd = tag[nameStart...].firstIndex(where: { $0 == 32 || $0 == 9 || $0 == 10 || $0 == 13 || $0 == UInt8(ascii: "/") }) ?? tag.endIndex
            let name = localName(tag[nameStart..<nameEnd])
            let isPoint = name == "trkpt" || name == "rtept" || name == "wpt"
            if !isEnd && isPoint {
                if let latText = attribute("lat", in: tag), let lonText = attribute("lon", in: tag),
                   let lat = Double(latText), let lon = Double(lonText), (-90...90).contains(lat), (-180...180).contains(lon) {
                    current = Point(latitude: lat, longitude: lon)
                    if selfClosing, let p = current { points.append(p); current = nil }
                } else {
                    skipped += 1
                    current = nil
                }
                text.removeAll()
                continue
            }
            if isEnd && isPoint {
                if let p = current { points.append(p) }
                current = nil
                continue
            }
            guard current != nil else { continue }
            if !isEnd { text.removeAll(); continue }
            let value = textValue()
            text.removeAll()
            switch name {
            case "ele": current?.elevation = Double(value)
            case "time":
                if let t = Timestamp(iso8601: value), t >= earliest { current?.time = t }
            // A count no receiver reports is left out: locgate's JSON would not read it back.
            case "sat": current?.satellites = Int(value).flatMap { (0...Position.maximumSatellites).contains($0) ? $0 : nil }
            case "hdop": current?.hdop = Double(value)
            case "vdop": current?.vdop = Double(value)
            case "pdop": current?.pdop = Double(value)
            case "geoidheight": current?.geoidHeight = Double(value)
            case "ageofdgpsdata": current?.correctionAge = Double(value).flatMap { $0 >= 0 ? $0 : nil }
            case "fix": current?.fix = value.lowercased()
            case "speed": current?.speed = Double(value)
            case "course": current?.course = Double(value)
            default: break
            }
        }
        return (points, skipped)
    }

    private static func find(_ needle: String, in bytes: [UInt8], from start: Int) -> Int? {
        let k = Array(needle.utf8)
        var i = start
        while i + k.count <= bytes.count {
            if bytes[i] == k[0] && bytes[i..<(i + k.count)].elementsEqual(k) { return i }
            i += 1
        }
        return nil
    }

    /// The position for a point; `mode` follows `<fix>` when present, else 3D with elevation, 2D without.
    static func position(_ pt: Point) -> Position {
        var p = Position(time: pt.time, latitude: pt.latitude, longitude: pt.longitude, altitude: pt.elevation)
        p.satellites = pt.satellites
        p.hdop = pt.hdop
        p.vdop = pt.vdop
        p.pdop = pt.pdop
        // The ellipsoid height is the elevation plus the geoid's height; without an elevation
        // the geoid's height alone says nothing about the point.
        let ellipsoidHeight = pt.elevation.flatMap { e in pt.geoidHeight.map { e + $0 } }
        p.detail = FixDetail(ellipsoidHeight: ellipsoidHeight, correctionAge: pt.correctionAge)
        p.speed = pt.speed
        p.course = pt.course
        switch pt.fix {
        case "none"?: p.mode = .noFix
        case "2d"?: p.mode = .twoD
        case "3d"?: p.mode = .threeD
        case "dgps"?: p.mode = pt.elevation == nil ? .twoD : .threeD; p.quality = .dgps
        case "pps"?: p.mode = pt.elevation == nil ? .twoD : .threeD; p.quality = .precise
        default: p.mode = pt.elevation == nil ? .twoD : .threeD
        }
        return p
    }
}
