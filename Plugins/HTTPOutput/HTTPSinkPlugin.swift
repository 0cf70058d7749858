import Foundation
import GatewayCore
import Outbox

/// The `http` sink: batches positions to an HTTP endpoint from a durable (SQLite) or memory queue.
public enum HTTPSinkPlugin: SinkPlugin {
    public static let info = PluginInfo(
        type: "http", kind: .sink,
        summary: "Uploads positions in batches over HTTP(S) from a durable SQLite queue; deletes them only after the server accepted them.",
        folder: "HTTPOutput",
        options: [
            OptionSpec("url", "string", required: true, "Endpoint (http:// or https://); ${ENV} allowed."),
            OptionSpec("method", "POST | PUT", default: "\"POST\"", "Request method."),
            OptionSpec("headers", "object", default: "{}", "Extra request headers; values may use ${ENV}."),
            OptionSpec("auth", "object", default: "none", "{\"bearer\": TOKEN} or {\"user\": U, \"password\": P} (basic); values may use ${ENV}."),
            OptionSpec("timeout", "duration", default: "\"30s\"", "Per-request timeout; a timeout is retried."),
            OptionSpec("gzip", "boolean", default: "false", "Compress bodies with gzip (Content-Encoding: gzip)."),
            OptionSpec("batch.max_positions", "integer", default: "500", "Send when this many positions are queued (and never more per request)."),
            OptionSpec("batch.max_bytes", "integer", default: "1000000", "Send when the queued JSON reaches this many bytes; no body exceeds it (before gzip) unless one position alone does."),
            OptionSpec("batch.interval", "duration", default: "\"10s\"", "Send what is queued this long after the first unsent position arrived, even if the batch is not full."),
            OptionSpec("body.format", "json_array | jsonl | geojson | template", default: "\"json_array\"", "Body encoding; template uses body.template and body.fields."),
            OptionSpec("body.template", "JSON", default: "\"$positions\"", "template: the JSON document sent; the string \"$positions\" marks where the array of records goes. Strings may use ${ENV}."),
            OptionSpec("body.fields", "object", default: "whole position objects", "template: output field name → source field (\"lat\") or {\"from\", \"time_format\", \"zone\", \"scale\", \"decimals\"} or {\"value\": constant}. Fields not listed are dropped."),
            OptionSpec("success.json", "object", default: "none", "Predicate a 2xx answer's JSON must pass: {\"path\": \"code\", \"equals\" | \"not_equals\" | \"greater_than\" | \"less_than\": value}."),
            OptionSpec("success.on_mismatch", "retry | dead_letter", default: "\"retry\"", "What a 2xx answer failing success.json means."),
            OptionSpec("retry.initial", "duration", default: "\"1s\"", "First retry delay; doubles per attempt (±20% jitter). Retry-After is honoured when longer."),
            OptionSpec("retry.max", "duration", default: "\"60s\"", "Longest retry delay."),
            OptionSpec("retry.max_attempts", "integer", default: "0", "Attempts before a batch goes to the dead letters; 0 retries forever."),
        ] + OutboxOptions.specs,
        sample: #"{ "type": "http", "inputs": ["receiver"], "url": "https://example.org/api/track", "headers": { "X-Device": "${DEVICE_ID:-gw1}" }, "auth": { "bearer": "${TRACK_TOKEN:-secret}" }, "batch": { "max_positions": 500, "interval": "20s" }, "queue": { "path": "upload.sqlite" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> HTTPSinkConfiguration {
        var c = HTTPSinkConfiguration()
        c.url = options.requiredString("url") ?? ""
        if !c.url.isEmpty {
            let lower = c.url.lowercased()
            if URL(string: c.url) == nil || !(lower.hasPrefix("http://") || lower.hasPrefix("https://")) {
                options.report("url", "expected an http:// or https:// URL, got \"\(c.url)\"")
            }
        }
        c.method = HTTPSinkConfiguration.Method(rawValue: options.choice("method", ["POST", "PUT"], default: "POST")) ?? .post
        if let headers = options.stringMap("headers") {
            c.headers = headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        }
        if var auth = options.object("auth") {
            if let token = auth.string("bearer") {
                c.authorization = "Bearer \(token)"
                if auth.has("user") || auth.has("password") { auth.report("", "give either bearer or user and password") }
            } else if let user = auth.string("user") {
                let password = auth.string("password") ?? ""
                c.authorization = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            } else {
                _ = auth.has("password")
                auth.report("", "expected {\"bearer\": TOKEN} or {\"user\": U, \"password\": P}")
            }
            auth.finish()
        }
        c.timeout = options.duration("timeout", default: .seconds(30), minimum: .milliseconds(100))
        c.gzip = options.bool("gzip", default: false)

        if var batch = options.object("batch") {
            c.maxPositions = batch.int("max_positions", default: 500, in: 1...1_000_000)
            c.maxBytes = batch.int("max_bytes", default: 1_000_000, in: 1024...1_000_000_000)
            c.interval = batch.duration("interval", default: .seconds(10), minimum: .milliseconds(10))
            batch.finish()
        }

        if var body = options.object("body") {
            c.body = readBody(&body)
            body.finish()
        }

        if var success = options.object("success") {
            if var json = success.object("json") {
                c.successPredicate = readPredicate(&json)
                json.finish()
            }
            c.onMismatch = HTTPSinkConfiguration.OnMismatch(rawValue: success.choice("on_mismatch", ["retry", "dead_letter"], default: "retry")) ?? .retry
            success.finish()
        }

        if var retry = options.object("retry") {
            c.retryInitial = retry.duration("initial", default: .seconds(1), minimum: .milliseconds(1))
            c.retryMax = retry.duration("max", default: .seconds(60), minimum: .milliseconds(1))
            c.retryMaxAttempts = retry.int("max_attempts", default: 0, in: 0...1_000_000)
            if c.retryMax < c.retryInitial { retry.report("max", "must be at least retry.initial (\(DurationText.format(c.retryInitial)))") }
            retry.finish()
        }

        c.queue = OutboxOptions.read(&options)
        return c
    }

    static func readBody(_ body: inout OptionReader) -> BodyFormat {
        let format = body.choice("format", ["json_array", "jsonl", "geojson", "template"], default: "json_array")
        let template = body.value("template")
        let hasFields = body.has("fields")
        if format != "template" {
            if template != nil { body.report("template", "only used with \"format\": \"template\"") }
            if hasFields { body.report("fields", "only used with \"format\": \"template\"") }
        }
        switch format {
        case "jsonl": return .jsonl
        case "geojson": return .geojson
        case "template": break
        default: return .jsonArray
        }
        // The template with "$positions" replaced by a marker, then split around it.
        let marker = "\u{1}locgate-positions\u{1}"
        var placeholders = 0
        func substituted(_ v: JSONValue, at path: String) -> JSONValue {
            switch v {
            case .string(let s) where s == BodyTemplate.placeholder:
                placeholders += 1
                return .string(marker)
            case .string(let s): return .string(body.substitute(s, at: path))
            case .array(let a): return .array(a.enumerated().map { substituted($0.element, at: "\(path)[\($0.offset)]") })
            case .object(let o): return .object(JSONObject(o.map { ($0.key, substituted($0.value, at: "\(path).\($0.key)")) }))
            default: return v
            }
        }
        let doc = substituted(template ?? .string(BodyTemplate.placeholder), at: "template")
        if placeholders != 1 {
            body.report("template", "must contain the string \"\(BodyTemplate.placeholder)\" exactly once (found \(placeholders))")
        }
        var bytes: [UInt8] = []
        JSONWriter.append(doc, to: &bytes)
        var quotedMarker: [UInt8] = []
        JSONWriter.appendString(marker, to: &quotedMarker)
        var prefix: [UInt8] = [UInt8(ascii: "[")]
        var suffix: [UInt8] = [UInt8(ascii: "]")]
        if let r = bytes.firstRange(of: quotedMarker) {
            prefix = Array(bytes[..<r.lowerBound]) + [UInt8(ascii: "[")]
            suffix = [UInt8(ascii: "]")] + Array(bytes[r.upperBound...])
        }
        var fields: [FieldMapping]?
        if case .object(let spec)? = body.value("fields"), var reader = body.object("fields") {
            fields = spec.compactMap { m in readField(name: m.key, spec: m.value, reader: &reader) }
            if spec.isEmpty { reader.report("", "must list at least one field") }
            reader.finish()
        } else if hasFields, body.value("fields") != nil {
            _ = body.object("fields")  // reports the wrong kind
        }
        return .template(BodyTemplate(prefix: prefix, suffix: suffix, fields: fields))
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
    static func timeZone(_ text: String) -> TimeZone? {
        if let first = text.first, first == "+" || first == "-" {
            let digits = text.dropFirst().filter { $0 != ":" }
            guard digits.count == 4, let v = Int(digits) else { return nil }
            let seconds = (v / 100 * 3600 + v % 100 * 60) * (first == "-" ? -1 : 1)
            return TimeZone(secondsFromGMT: seconds)
        }
        if text.uppercased() == "UTC" || text.uppercased() == "Z" { return TimeZone(identifier: "UTC") }
        return TimeZone(identifier: text)
    }

    static func readPredicate(_ json: inout OptionReader) -> ResponsePredicate? {
        let path = json.requiredString("path")
        var tests: [ResponsePredicate.Test] = []
        if let v = json.value("equals") { tests.append(.equals(v)) }
        if let v = json.value("not_equals") { tests.append(.notEquals(v)) }
        if json.has("greater_than") { if let n = json.double("greater_than") { tests.append(.greaterThan(n)) } }
        if json.has("less_than") { if let n = json.double("less_than") { tests.append(.lessThan(n)) } }
        guard tests.count == 1 else {
            json.report("", "give exactly one of \(ResponsePredicate.testNames.joined(separator: ", "))")
            return nil
        }
        guard let path else { return nil }
        return ResponsePredicate(path: path.split(separator: ".").map(String.init), test: tests[0])
    }

    public static func isDurable(_ configuration: HTTPSinkConfiguration) -> Bool {
        OutboxOptions.isDurable(configuration.queue)
    }

    public static func claims(of configuration: HTTPSinkConfiguration) -> [String] {
        OutboxOptions.claims(configuration.queue)
    }

    public static func makeSink(_ configuration: HTTPSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        HTTPSink(configuration: configuration, context: context, outbox: try OutboxOptions.open(configuration.queue, context: context))
    }
}
