import GatewayCore

/// A TPV report's fields, as far as a ``Position`` needs them; absent or NaN fields are nil.
package struct GpsdTPV: Sendable, Equatable {
    var device: String?
    var time: Timestamp?
    var mode: FixMode = .unknown
    var status: FixQuality?
    var latitude: Double?
    var longitude: Double?
    /// `altMSL`, else the older `alt`.
    var altitude: Double?
    var speed: Double?
    var track: Double?
    /// `eph`, else the length of (`epx`, `epy`).
    var horizontalError: Double?
    var verticalError: Double?
    /// `altHAE`, `eps`, `epd` and `dgpsAge`: the figures a u-blox or RTK receiver gives gpsd.
    var detail = FixDetail()
}

/// A SKY report's fix-quality figures.
package struct GpsdSky: Sendable, Equatable {
    var device: String?
    /// `uSat`, else the number of satellites marked `used`.
    var satellitesUsed: Int?
    var hdop: Double?
    var vdop: Double?
    var pdop: Double?
}

/// One line from gpsd, classified.
package enum GpsdReport: Sendable, Equatable {
    case tpv(GpsdTPV)
    case sky(GpsdSky)
    /// `VERSION`, `DEVICES`, `WATCH`, `ERROR`, … : not position data; the class is kept for logs.
    case other(className: String, message: String?)
}

/// Why a line is not a gpsd report.
package struct GpsdReportError: Error, Sendable, CustomStringConvertible {
    package var description: String
}

/// Parses gpsd's JSON reports (protocol 3.x) with `JSONValue`.
package enum GpsdReportParser {
    /// Parses one line (without its line ending).
    package static func parse(_ line: UnsafeRawBufferPointer) throws(GpsdReportError) -> GpsdReport {
        let value: JSONValue
        do { value = try JSONValue.parse(line, maxDepth: 16) } catch {
            throw GpsdReportError(description: "malformed JSON: \(error)")
        }
        guard let object = value.objectValue else { throw GpsdReportError(description: "not a JSON object") }
        guard let className = object["class"]?.stringValue else { throw GpsdReportError(description: "no \"class\"") }
        switch className {
        case "TPV": return .tpv(tpv(object))
        case "SKY": return .sky(sky(object))
        case "ERROR": return .other(className: className, message: object["message"]?.stringValue)
        case "VERSION": return .other(className: className, message: object["release"]?.stringValue)
        default: return .other(className: className, message: nil)
        }
    }

    /// Parses a line given as bytes (tests and small inputs).
    static func parse(_ bytes: [UInt8]) throws(GpsdReportError) -> GpsdReport {
        let result: Result<GpsdReport, GpsdReportError> = bytes.withUnsafeBytes { raw in
            do throws(GpsdReportError) { return .success(try parse(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    static func tpv(_ o: JSONObject) -> GpsdTPV {
        var t = GpsdTPV()
        t.device = o["device"]?.stringValue
        if let text = o["time"]?.stringValue {
            t.time = Timestamp(iso8601: text)
        } else if let seconds = finite(o["time"]) {
            // gpsd before protocol 3.10 sent epoch seconds.
            t.time = Timestamp(epochSeconds: seconds)
        }
        if let m = integer(o["mode"]), let mode = FixMode(rawValue: m) { t.mode = mode }
        if let s = integer(o["status"]) { t.status = FixQuality(rawValue: s) }
        t.latitude = finite(o["lat"]).flatMap { (-90.0...90.0).contains($0) ? $0 : nil }
        t.longitude = finite(o["lon"]).flatMap { (-180.0...180.0).contains($0) ? $0 : nil }
        if t.latitude == nil || t.longitude == nil { t.latitude = nil; t.longitude = nil }
        t.altitude = finite(o["altMSL"]) ?? finite(o["alt"])
        t.speed = finite(o["speed"])
        t.track = finite(o["track"])
        if let eph = finite(o["eph"]) {
            t.horizontalError = eph
        } else if let x = finite(o["epx"]), let y = finite(o["epy"]) {
            t.horizontalError = (x * x + y * y).squareRoot()
        }
        t.verticalError = finite(o["epv"])
        t.detail = FixDetail(ellipsoidHeight: finite(o["altHAE"]), speedError: finite(o["eps"]),
                             courseError: finite(o["epd"]), correctionAge: finite(o["dgpsAge"]))
        return t
    }

    static func sky(_ o: JSONObject) -> GpsdSky {
        var s = GpsdSky()
        s.device = o["device"]?.stringValue
        if let u = integer(o["uSat"]) {
            s.satellitesUsed = u
        } else if let satellites = o["satellites"]?.arrayValue {
            s.satellitesUsed = satellites.reduce(0) { $0 + ($1["used"]?.boolValue == true ? 1 : 0) }
        }
        // A count no receiver reports is left out: locgate's JSON would not read it back.
        if let n = s.satellitesUsed, !(0...Position.maximumSatellites).contains(n) { s.satellitesUsed = nil }
        s.hdop = finite(o["hdop"])
        s.vdop = finite(o["vdop"])
        s.pdop = finite(o["pdop"])
        return s
    }

    /// A finite number, or nil for absent, non-numeric and NaN/infinite values.
    private static func finite(_ v: JSONValue?) -> Double? {
        guard let n = v?.numberValue, n.isFinite else { return nil }
        return n
    }

    private static func integer(_ v: JSONValue?) -> Int? {
        guard let n = finite(v), n == n.rounded(), abs(n) < 1e9 else { return nil }
        return Int(n)
    }
}
