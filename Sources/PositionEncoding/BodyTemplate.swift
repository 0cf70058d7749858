import Foundation
import GatewayCore

/// A user's JSON document with the positions at the `"$positions"` placeholder, each position
/// written field by field (`body.fields`) or as the whole position object.
///
/// One implementation for every sink that sends documents: the http sink puts a batch there as
/// a JSON array (`[record,record]`), the mqtt sink one position per message as the record itself.
/// The template is read once at configuration time and split around the placeholder, so
/// encoding a position is appending bytes.
public struct BodyTemplate: Sendable {
    /// Everything before the placeholder (`{"vipId":"42","list":`).
    public var prefix: [UInt8]
    /// Everything after it (`}`).
    public var suffix: [UInt8]
    /// Output fields in order; nil writes whole position objects.
    public var fields: [FieldMapping]?
    /// The template as read (`${ENV}` substituted), with ``marker`` where the positions go: what
    /// a server that reads such documents (the `http_server` source) walks to find them.
    public var document: JSONValue

    /// The string value in a template that stands for the positions.
    public static let placeholder = "$positions"
    /// What stands for the placeholder in ``document`` (a text no JSON sender writes).
    public static let marker = "\u{1}locgate-positions\u{1}"

    public init(prefix: [UInt8], suffix: [UInt8], fields: [FieldMapping]?, document: JSONValue = .string(BodyTemplate.marker)) {
        self.prefix = prefix
        self.suffix = suffix
        self.fields = fields
        self.document = document
    }

    /// Appends one record: the mapped fields of `position`, or `storedJSON` (the position object
    /// as queued) when the template lists no fields. A record that needs fields and has no
    /// position appends nothing.
    public func appendRecord(_ position: Position?, storedJSON: [UInt8], to out: inout [UInt8]) {
        if let fields {
            if let position { FieldMapping.appendObject(fields, position, to: &out) }
        } else {
            out.append(contentsOf: storedJSON)
        }
    }

    /// Appends the whole document with one position standing for the placeholder.
    public func appendDocument(_ position: Position, to out: inout [UInt8]) {
        out.append(contentsOf: prefix)
        if let fields { FieldMapping.appendObject(fields, position, to: &out) } else { PositionJSON.append(position, to: &out) }
        out.append(contentsOf: suffix)
    }

    /// Reports `template` and `fields` as misplaced when the body's format is not `template`.
    public static func reportUnused(_ body: inout OptionReader, format: String) {
        if body.value("template") != nil { body.report("template", "only used with \"format\": \"\(format)\"") }
        if body.has("fields") { body.report("fields", "only used with \"format\": \"\(format)\"") }
    }

    /// Reads `template` and `fields` of a `body` object, reporting every problem with its path.
    public static func read(_ body: inout OptionReader) -> BodyTemplate {
        // The template with "$positions" replaced by a marker, then split around it.
        let marker = BodyTemplate.marker
        var placeholders = 0
        func substituted(_ v: JSONValue, at path: String) -> JSONValue {
            switch v {
            case .string(let s) where s == placeholder:
                placeholders += 1
                return .string(marker)
            case .string(let s): return .string(body.substitute(s, at: path))
            case .array(let a): return .array(a.enumerated().map { substituted($0.element, at: "\(path)[\($0.offset)]") })
            case .object(let o): return .object(JSONObject(o.map { ($0.key, substituted($0.value, at: "\(path).\($0.key)")) }))
            default: return v
            }
        }
        let template = body.value("template")
        let doc = substituted(template ?? .string(placeholder), at: "template")
        if placeholders != 1 {
            body.report("template", "must contain the string \"\(placeholder)\" exactly once (found \(placeholders))")
        }
        var bytes: [UInt8] = []
        JSONWriter.append(doc, to: &bytes)
        var quotedMarker: [UInt8] = []
        JSONWriter.appendString(marker, to: &quotedMarker)
        var prefix: [UInt8] = []
        var suffix: [UInt8] = []
        if let r = bytes.firstRange(of: quotedMarker) {
            prefix = Array(bytes[..<r.lowerBound])
            suffix = Array(bytes[r.upperBound...])
        }
        var fields: [FieldMapping]?
        let hasFields = body.has("fields")
        if case .object(let spec)? = body.value("fields"), var reader = body.object("fields") {
            fields = spec.compactMap { m in readField(name: m.key, spec: m.value, reader: &reader) }
            if spec.isEmpty { reader.report("", "must list at least one field") }
            reader.finish()
        } else if hasFields, body.value("fields") != nil {
            _ = body.object("fields")  // reports the wrong kind
        }
        return BodyTemplate(prefix: prefix, suffix: suffix, fields: fields, document: doc)
    }

    private static func readField(name: String, spec: JSONValue, reader: inout OptionReader) -> FieldMapping? {
        if case .string(let from) = spec {
            _ = reader.string(name)
            return mapping(name: name, from: from, timeFormat: nil, zone: nil, scale: nil, decimals: nil, reader: reader, at: name)
        }
        guard var f = reader.object(name) else { return nil }
        defer { f.finish() }
        if f.has("value") {
            if f.has("from") { f.report("", "give either from or value") }
            var bytes: [UInt8] = []
            if let v = f.value("value") {
                if case .string(let s) = v { JSONWriter.appendString(f.substitute(s, at: "value"), to: &bytes) } else { JSONWriter.append(v, to: &bytes) }
            } else {
                bytes = Array("null".utf8)
            }
            return FieldMapping(name: name, value: .constant(bytes))
        }
        guard let from = f.requiredString("from") else { return nil }
        let timeFormat = f.string("time_format")
        let zone = f.string("zone")
        let scale = f.double("scale")
        let decimals = f.optionalInt("decimals", in: 0...12)
        return mapping(name: name, from: from, timeFormat: timeFormat, zone: zone, scale: scale, decimals: decimals, reader: f, at: "")
    }

    private static func mapping(name: String, from: String, timeFormat: String?, zone: String?, scale: Double?, decimals: Int?,
                                reader: OptionReader, at key: String) -> FieldMapping? {
        func problem(_ field: String, _ message: String) {
            reader.report(key.isEmpty ? field : key, message)
        }
        if from == "time" {
            if scale != nil { problem("scale", "not used with time") }
            if decimals != nil { problem("decimals", "not used with time") }
            let format = timeFormat ?? "iso8601"
            switch format {
            case "iso8601":
                if zone != nil { problem("zone", "iso8601 times are always UTC; use a pattern for another zone") }
                return FieldMapping(name: name, value: .time(.iso8601))
            case "epoch_s": return FieldMapping(name: name, value: .time(.epochSeconds))
            case "epoch_ms": return FieldMapping(name: name, value: .time(.epochMilliseconds))
            default:
                guard let tz = timeZone(zone ?? "UTC") else {
                    problem("zone", "unknown time zone \"\(zone ?? "")\" (use an IANA name such as Asia/Shanghai, or +08:00)")
                    return nil
                }
                do {
                    return FieldMapping(name: name, value: .time(.pattern(try TimePattern(pattern: format, zone: tz))))
                } catch {
                    problem("time_format", "expected iso8601, epoch_s, epoch_ms or a pattern such as \"yyyy-MM-dd HH:mm:ss\": \(error.message)")
                    return nil
                }
            }
        }
        if timeFormat != nil { problem("time_format", "only used with \"from\": \"time\"") }
        if zone != nil { problem("zone", "only used with \"from\": \"time\"") }
        let field: PositionField
        if from.hasPrefix("attributes."), from.count > 11 {
            field = .attribute(String(from.dropFirst(11)))
        } else if let f = PositionField.names[from] {
            field = f
        } else {
            problem("from", "unknown position field \"\(from)\" (one of time, \(PositionField.names.keys.sorted().joined(separator: ", ")), attributes.KEY)")
            return nil
        }
        return FieldMapping(name: name, value: .field(field, scale: scale, decimals: decimals))
    }

    /// An IANA zone name, `UTC`, or a fixed offset `+08:00` / `-0530`.
    public static func timeZone(_ text: String) -> TimeZone? {
        if let first = text.first, first == "+" || first == "-" {
            let digits = text.dropFirst().filter { $0 != ":" }
            guard digits.count == 4, let v = Int(digits) else { return nil }
            let seconds = (v / 100 * 3600 + v % 100 * 60) * (first == "-" ? -1 : 1)
            return TimeZone(secondsFromGMT: seconds)
        }
        if text.uppercased() == "UTC" || text.uppercased() == "Z" { return TimeZone(identifier: "UTC") }
        return TimeZone(identifier: text)
    }
}
