import GatewayCore

/// One output field of a template record: a name and where its value comes from.
public struct FieldMapping: Sendable {
    public enum Value: Sendable {
        /// Encoded JSON written as is.
        case constant([UInt8])
        case field(PositionField, scale: Double?, decimals: Int?)
        case time(TimeFormat)
    }

    /// The field's name in the record.
    public let name: String
    /// The quoted, escaped key followed by `:`.
    var key: [UInt8]
    public var value: Value

    public init(name: String, value: Value) {
        self.name = name
        var k: [UInt8] = []
        JSONWriter.appendString(name, to: &k)
        k.append(UInt8(ascii: ":"))
        self.key = k
        self.value = value
    }

    /// Appends `{…}` for one position; fields without a value are left out.
    public static func appendObject(_ fields: [FieldMapping], _ p: Position, to out: inout [UInt8]) {
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
    case id, source, device, mode, status, lat, lon, altMSL, altHAE, speed, track, heading, uSat
    case hdop, vdop, pdop, eph, epv, eps, epd, dgpsAge, datum, x, y, event, fence
    case attribute(String)

    /// The names accepted in `from` (besides `time` and `attributes.KEY`).
    public static let names: [String: PositionField] = [
        "id": .id, "source": .source, "device": .device, "mode": .mode, "status": .status,
        "lat": .lat, "lon": .lon, "altMSL": .altMSL, "altHAE": .altHAE, "speed": .speed, "track": .track, "heading": .heading,
        "uSat": .uSat, "hdop": .hdop, "vdop": .vdop, "pdop": .pdop, "eph": .eph, "epv": .epv,
        "eps": .eps, "epd": .epd, "dgpsAge": .dgpsAge,
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
        case .altHAE: return num(p.ellipsoidHeight, 3)
        case .speed: return num(p.speed, 3)
        case .track: return num(p.course, 3)
        case .heading: return num(p.heading, 3)
        case .uSat: return p.satellites.map { .integer($0) }
        case .hdop: return num(p.hdop, 2)
        case .vdop: return num(p.vdop, 2)
        case .pdop: return num(p.pdop, 2)
        case .eph: return num(p.horizontalError, 3)
        case .epv: return num(p.verticalError, 3)
        case .eps: return num(p.speedError, 3)
        case .epd: return num(p.courseError, 5)
        case .dgpsAge: return num(p.correctionAge, 3)
        case .datum: return .text(p.datum.name)
        case .x: return num(p.x, 3)
        case .y: return num(p.y, 3)
        case .event: return p.event.map { .text($0.kind.rawValue) }
        case .fence: return p.event?.fenceId.map { .text($0) }
        case .attribute(let key): return p.attributes[key].map { .text($0) }
        }
    }
}

