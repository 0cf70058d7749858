import Foundation
import GatewayCore
import PositionEncoding

/// Reads documents written through a template, the inverse of the http sink's `template`
/// body: the same `template` (with `"$positions"` where the list is, and `"$device"` where the
/// device identifier is) and the same `fields`, so one locgate can be the server of another's
/// upload, or of any client whose body a template describes.
package struct TemplateReader: Sendable {
    /// A step from the document's root to a value: a key, or an index of an array.
    enum Step: Sendable, Equatable {
        case key(String)
        case index(Int)
    }

    /// The string that marks the device identifier in a server-side template.
    static let devicePlaceholder = "$device"

    let positionsPath: [Step]
    let devicePath: [Step]?
    let fields: [FieldMapping]?

    package init(_ template: BodyTemplate) {
        fields = template.fields
        positionsPath = TemplateReader.path(to: .string(BodyTemplate.marker), in: template.document) ?? []
        devicePath = TemplateReader.path(to: .string(TemplateReader.devicePlaceholder), in: template.document)
    }

    static func path(to target: JSONValue, in value: JSONValue) -> [Step]? {
        if value == target { return [] }
        switch value {
        case .object(let o):
            for (k, v) in o { if let rest = path(to: target, in: v) { return [.key(k)] + rest } }
        case .array(let a):
            for (i, v) in a.enumerated() { if let rest = path(to: target, in: v) { return [.index(i)] + rest } }
        default: break
        }
        return nil
    }

    static func value(at path: [Step], in document: JSONValue) -> JSONValue? {
        var v = document
        for step in path {
            switch (step, v) {
            case (.key(let k), .object(let o)):
                guard let next = o[k] else { return nil }
                v = next
            case (.index(let i), .array(let a)):
                guard i < a.count else { return nil }
                v = a[i]
            default: return nil
            }
        }
        return v
    }

    /// The positions of a document and the device identifier it names (nil without `$device`).
    package func read(_ document: JSONValue, source: String) throws(RequestRejection) -> (device: String?, positions: [Position]) {
        guard let list = TemplateReader.value(at: positionsPath, in: document) else {
            throw RequestRejection(400, "bad_body", "no positions where the template has \(BodyTemplate.placeholder)")
        }
        let items: [JSONValue]
        switch list {
        case .array(let a): items = a
        case .object: items = [list]
        default: throw RequestRejection(400, "bad_body", "expected the positions as an array, got \(list.kindName)")
        }
        var device: String?
        if let devicePath {
            guard let v = TemplateReader.value(at: devicePath, in: document), let text = v.scalarText, !text.isEmpty else {
                throw RequestRejection(400, "no_device", "no device identifier where the template has \(TemplateReader.devicePlaceholder)")
            }
            device = text
        }
        var positions: [Position] = []
        for (n, item) in items.enumerated() {
            do throws(RequestRejection) {
                positions.append(try position(item, source: source))
            } catch {
                throw RequestRejection(error.status, error.counter, "position \(n + 1): \(error.reason)")
            }
        }
        return (device, positions)
    }

    private func position(_ item: JSONValue, source: String) throws(RequestRejection) -> Position {
        guard let fields else {
            do {
                var p = try PositionJSON.decode(item, source: source) { _ in "" }
                p.source = source
                return p
            } catch {
                throw RequestRejection(400, "bad_body", "\(error)")
            }
        }
        guard case .object(let o) = item else { throw RequestRejection(400, "bad_body", "expected an object, got \(item.kindName)") }
        var p = Position()
        p.source = source
        var modeGiven = false
        for f in fields {
            guard let v = o[f.name], v != .null else { continue }
            switch f.value {
            case .constant:
                continue
            case .time(let format):
                guard let t = TemplateReader.time(v, format) else {
                    throw RequestRejection(400, "bad_body", "\(f.name): not a time as the template writes it: \(v.jsonText.prefix(40))")
                }
                p.time = t
            case .field(let field, let scale, _):
                if field == .mode { modeGiven = true }
                try TemplateReader.set(field, from: v, scale: scale, name: f.name, in: &p)
            }
        }
        guard p.time != nil else { throw RequestRejection(400, "bad_body", "no time") }
        guard let lat = p.latitude, let lon = p.longitude, (-90...90).contains(lat), (-180...180).contains(lon) else {
            throw RequestRejection(400, "bad_body", "no latitude and longitude in degrees")
        }
        if !modeGiven { p.mode = p.altitude == nil ? .twoD : .threeD }
        return p
    }

    static func time(_ v: JSONValue, _ format: TimeFormat) -> Timestamp? {
        switch (format, v) {
        case (.iso8601, .string(let s)): return Timestamp(iso8601: s)
        case (.epochSeconds, .number(let n)): return Timestamp(epochSeconds: n)
        case (.epochMilliseconds, .number(let n)): return Timestamp(epochSeconds: n / 1000)
        case (.pattern(let pattern), .string(let s)): return pattern.parse(s)
        default: return nil
        }
    }

    static func set(_ field: PositionField, from v: JSONValue, scale: Double?, name: String, in p: inout Position) throws(RequestRejection) {
        func number() throws(RequestRejection) -> Double {
            let n: Double?
            switch v {
            case .number(let x): n = x
            case .string(let s): n = Double(s)
            default: n = nil
            }
            guard let n, n.isFinite else { throw RequestRejection(400, "bad_body", "\(name): expected a number, got \(v.jsonText.prefix(40))") }
            return n / (scale ?? 1)
        }
        /// A whole number in `range`: `Int(_:)` of a larger double (a client's `1e300`) would trap.
        func whole(_ range: ClosedRange<Int>, _ what: String) throws(RequestRejection) -> Int {
            let n = try number()
            guard n == n.rounded(), n >= Double(range.lowerBound), n <= Double(range.upperBound), let i = Int(exactly: n) else {
                throw RequestRejection(400, "bad_body", "\(name): expected \(what), got \(JSONValue.number(n).jsonText)")
            }
            return i
        }
        func text() throws(RequestRejection) -> String {
            guard let t = v.scalarText else { throw RequestRejection(400, "bad_body", "\(name): expected a string, got \(v.kindName)") }
            return t
        }
        switch field {
        case .id: p.id = try text()
        case .source: break  // the receiving source's own id
        case .device: p.device = try text()
        // Whole numbers as before; one that names no mode or status reads as unknown.
        case .mode: p.mode = FixMode(rawValue: try whole(-1_000_000_000...1_000_000_000, "a fix mode")) ?? .unknown
        case .status: p.quality = FixQuality(rawValue: try whole(-1_000_000_000...1_000_000_000, "a fix status"))
        case .lat: p.latitude = try number()
        case .lon: p.longitude = try number()
        case .altMSL: p.altitude = try number()
        case .altHAE: p.ellipsoidHeight = try number()
        case .speed: p.speed = try number()
        case .track: p.course = try number()
        case .heading: p.heading = try number()
        case .uSat: p.satellites = try whole(0...Position.maximumSatellites, "a satellite count")
        case .hdop: p.hdop = try number()
        case .vdop: p.vdop = try number()
        case .pdop: p.pdop = try number()
        case .eph: p.horizontalError = try number()
        case .epv: p.verticalError = try number()
        case .eps: p.speedError = try number()
        case .epd: p.courseError = try number()
        case .dgpsAge: p.correctionAge = try number()
        case .datum:
            guard let d = Datum(parsing: try text()) else { throw RequestRejection(400, "bad_body", "\(name): not a datum") }
            p.datum = d
        case .x: p.x = try number()
        case .y: p.y = try number()
        case .event, .fence: break  // events are made by transforms, not taken from clients
        case .attribute(let key): p.attributes[key] = try text()
        }
    }
}
