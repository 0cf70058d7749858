/// Reads one component's options from its JSON object, reporting every problem with its path.
///
/// Each typed accessor marks its key as known, checks the value, substitutes `${ENV}` in strings,
/// and on a problem reports it and returns the default so reading goes on; ``finish()`` then
/// reports the keys nobody asked for (typos such as `"baud_rate"`).
public struct OptionReader {
    /// JSON path of this object, e.g. `sinks.upload` or `sinks.upload.batch`.
    public let path: String
    /// Directory relative file paths are resolved against (the configuration file's directory).
    public let baseDirectory: String
    public let environment: [String: String]
    let object: JSONObject
    let diagnostics: ConfigurationDiagnostics
    /// Every key an accessor asked for, present or not: plugin tests compare it with the documented options.
    public private(set) var askedKeys: [String] = []
    private var consumed: Set<String> = []
    /// Dotted names of options documented inside nested objects (`batch.interval`): an unknown
    /// key that is one of their last parts is pointed there (`interval` → `batch.interval`).
    public var nestedOptions: [String] = []

    public init(object: JSONObject, path: String, diagnostics: ConfigurationDiagnostics,
                environment: [String: String] = [:], baseDirectory: String = ".") {
        self.object = object
        self.path = path
        self.diagnostics = diagnostics
        self.environment = environment
        self.baseDirectory = baseDirectory
    }

    /// The JSON path of `key` inside this object (`key` may itself be a relative path, `servers[0]`).
    public func path(of key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The JSON path of a key as the document wrote it, which may be anything: one a dotted path
    /// cannot show — empty, or with a dot, a bracket, a quote, white space or a control
    /// character — is written `["key"]` (JSON-escaped), so a problem with it still says where it
    /// is. An empty top-level key was reported at an empty path (found by Fuzz/Configuration).
    func path(ofDocumentKey key: String) -> String {
        let plain = !key.isEmpty && !key.unicodeScalars.contains {
            $0 == "." || $0 == "[" || $0 == "]" || $0 == "\"" || $0.properties.isWhitespace || $0.properties.generalCategory == .control
        }
        if plain { return path(of: key) }
        var quoted: [UInt8] = []
        JSONWriter.appendString(key, to: &quoted)
        return "\(path)[\(String(decoding: quoted, as: UTF8.self))]"
    }

    /// Reports a problem at `key` (for cross-field checks a plugin makes itself).
    public func report(_ key: String, _ message: String) {
        diagnostics.report(key.isEmpty ? path : path(of: key), message)
    }

    /// True when the object has `key` (the key counts as known).
    public mutating func has(_ key: String) -> Bool {
        ask(key)
        return object[key] != nil
    }

    /// Marks keys handled elsewhere (the pipeline's common keys) as known.
    public mutating func markKnown(_ keys: [String]) {
        for k in keys { consumed.insert(k) }
    }

    /// Reports every key that no accessor asked for.
    public func finish() {
        let options = askedKeys.filter { !PipelineConfiguration.commonKeys.contains($0) }
        for m in object where !consumed.contains(m.key) {
            if let hint = OptionReader.unsupportedFeatures[m.key] {
                diagnostics.report(path(ofDocumentKey: m.key), hint)
                continue
            }
            let topLevel = path.isEmpty
            var message = topLevel ? "unknown top-level key" : "unknown option"
            let guess = Suggestion.closest(to: m.key, among: options)
                ?? nestedOptions.first { $0.split(separator: ".").last.map(String.init) == m.key }
            message += Suggestion.hint(guess)
            if !options.isEmpty { message += "\(guess == nil ? ";" : "") \(topLevel ? "keys" : "options"): \(options.joined(separator: ", "))" }
            diagnostics.report(path(ofDocumentKey: m.key), message)
        }
    }

    /// Options some components have and others do not: naming them on the wrong component says
    /// where they work instead of guessing a typo.
    static let unsupportedFeatures: [String: String] = [
        "duty_cycle": "not supported by this component: duty cycling works on the serial and gpsd sources only (see Docs/Power-and-health.md)",
        "health": "not supported by this component: health events come from the serial, tcp, udp and gpsd sources only (see Docs/Power-and-health.md)",
    ]

    private mutating func ask(_ key: String) {
        if !askedKeys.contains(key) { askedKeys.append(key) }
        consumed.insert(key)
    }

    private mutating func fetch(_ key: String) -> JSONValue? {
        ask(key)
        guard let v = object[key], v != .null else { return nil }
        return v
    }

    // MARK: - Raw values

    /// The raw JSON value of `key`, for options with a structure of their own.
    public mutating func value(_ key: String) -> JSONValue? { fetch(key) }

    /// A nested object as a reader of its own; call `finish()` on it when done.
    public mutating func object(_ key: String) -> OptionReader? {
        guard let v = fetch(key) else { return nil }
        guard case .object(let o) = v else {
            report(key, "expected an object, got \(v.kindName)")
            return nil
        }
        return OptionReader(object: o, path: path(of: key), diagnostics: diagnostics, environment: environment, baseDirectory: baseDirectory)
    }

    // MARK: - Strings

    /// A string with `${NAME}` / `${NAME:-default}` substituted, or nil when absent.
    public mutating func string(_ key: String) -> String? {
        guard let v = fetch(key) else { return nil }
        guard case .string(let s) = v else {
            report(key, "expected a string, got \(v.kindName)")
            return nil
        }
        return substitute(s, at: key)
    }

    /// A string that is a secret (a password, a token, an auth header): read like ``string(_:)``,
    /// and registered with ``Redaction`` so it never reaches a log line or an error.
    public mutating func secretString(_ key: String) -> String? {
        let s = string(key)
        if let s { Redaction.register(s) }
        return s
    }

    public mutating func string(_ key: String, default value: String) -> String {
        string(key) ?? value
    }

    /// A string that must be present and non-empty.
    public mutating func requiredString(_ key: String) -> String? {
        let present = object[key] != nil && object[key] != .null
        let s = string(key)
        if !present { report(key, "required option is missing") } else if s?.isEmpty == true { report(key, "must not be empty") }
        return s?.isEmpty == true ? nil : s
    }

    /// One of a fixed set of spellings.
    public mutating func choice(_ key: String, _ allowed: [String], default value: String) -> String {
        optionalChoice(key, allowed) ?? value
    }

    /// One of a fixed set of spellings, or nil when absent or not one of them (reported).
    public mutating func optionalChoice(_ key: String, _ allowed: [String]) -> String? {
        guard let s = string(key) else { return nil }
        guard allowed.contains(s) else {
            report(key, "expected one of \(allowed.map { "\"\($0)\"" }.joined(separator: ", ")), got \"\(s)\"\(Suggestion.hint(for: s, among: allowed))")
            return nil
        }
        return s
    }

    /// A file path, resolved against the configuration file's directory when relative.
    public mutating func filePath(_ key: String) -> String? {
        guard let s = string(key), !s.isEmpty else { return nil }
        return OptionReader.resolve(s, against: baseDirectory)
    }

    /// Resolves a relative path against a directory.
    public static func resolve(_ p: String, against base: String) -> String {
        if p.hasPrefix("/") || base.isEmpty || base == "." { return p }
        return base.hasSuffix("/") ? base + p : base + "/" + p
    }

    public mutating func stringArray(_ key: String) -> [String]? {
        guard let v = fetch(key) else { return nil }
        guard case .array(let items) = v else {
            report(key, "expected an array of strings, got \(v.kindName)")
            return nil
        }
        var out: [String] = []
        for (i, item) in items.enumerated() {
            guard case .string(let s) = item else {
                diagnostics.report("\(path(of: key))[\(i)]", "expected a string, got \(item.kindName)")
                continue
            }
            out.append(substitute(s, at: "\(key)[\(i)]"))
        }
        return out
    }

    /// An object of string values (numbers and booleans are accepted and written as text).
    public mutating func stringMap(_ key: String) -> [String: String]? {
        guard let v = fetch(key) else { return nil }
        guard case .object(let o) = v else {
            report(key, "expected an object of strings, got \(v.kindName)")
            return nil
        }
        var out: [String: String] = [:]
        for m in o {
            if case .string(let s) = m.value {
                out[m.key] = substitute(s, at: "\(key).\(m.key)")
            } else if let text = m.value.scalarText {
                out[m.key] = text
            } else {
                diagnostics.report("\(path(of: key)).\(m.key)", "expected a string, got \(m.value.kindName)")
            }
        }
        return out
    }

    // MARK: - Numbers

    public mutating func double(_ key: String) -> Double? {
        guard let v = fetch(key) else { return nil }
        guard case .number(let n) = v else {
            report(key, "expected a number, got \(v.kindName)")
            return nil
        }
        return n
    }

    public mutating func double(_ key: String, default value: Double, in range: ClosedRange<Double>? = nil) -> Double {
        (range.map { optionalDouble(key, in: $0) } ?? double(key)) ?? value
    }

    public mutating func optionalDouble(_ key: String, in range: ClosedRange<Double>) -> Double? {
        guard let n = double(key) else { return nil }
        guard range.contains(n) else {
            report(key, "must be between \(JSONValue.number(range.lowerBound).jsonText) and \(JSONValue.number(range.upperBound).jsonText), got \(JSONValue.number(n).jsonText)")
            return nil
        }
        return n
    }

    public mutating func int(_ key: String) -> Int? {
        guard let n = double(key) else { return nil }
        guard n == n.rounded(), abs(n) < 1e15 else {
            report(key, "expected a whole number, got \(JSONValue.number(n).jsonText)")
            return nil
        }
        return Int(n)
    }

    public mutating func int(_ key: String, default value: Int, in range: ClosedRange<Int>? = nil) -> Int {
        (range.map { optionalInt(key, in: $0) } ?? int(key)) ?? value
    }

    public mutating func optionalInt(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let n = int(key) else { return nil }
        guard range.contains(n) else {
            report(key, "must be between \(range.lowerBound) and \(range.upperBound), got \(n)")
            return nil
        }
        return n
    }

    public mutating func bool(_ key: String, default value: Bool) -> Bool {
        optionalBool(key) ?? value
    }

    /// A boolean, or nil when absent or not a boolean (reported).
    public mutating func optionalBool(_ key: String) -> Bool? {
        guard let v = fetch(key) else { return nil }
        guard case .bool(let b) = v else {
            report(key, "expected true or false, got \(v.kindName)")
            return nil
        }
        return b
    }

    // MARK: - Durations

    /// A duration: a string with a unit (`"500ms"`, `"20s"`, `"2m"`, `"1h30m"`) or a number of seconds.
    public mutating func duration(_ key: String) -> Duration? {
        guard let v = fetch(key) else { return nil }
        switch v {
        case .number(let n) where n >= 0 && n <= DurationText.maximumSeconds: return .milliseconds(Int64((n * 1000).rounded()))
        case .string(let s):
            if let d = DurationText.parse(substitute(s, at: key)) { return d }
            report(key, "expected a duration such as \"20s\", got \"\(s)\"")
        default:
            report(key, "expected a duration such as \"20s\", got \(v.kindName == "a number" ? v.jsonText : v.kindName)")
        }
        return nil
    }

    public mutating func duration(_ key: String, default value: Duration, minimum: Duration = .zero) -> Duration {
        optionalDuration(key, minimum: minimum) ?? value
    }

    /// A duration of at least `minimum`, or nil when absent or wrong (reported).
    public mutating func optionalDuration(_ key: String, minimum: Duration) -> Duration? {
        guard let d = duration(key) else { return nil }
        if d < minimum {
            report(key, "must be at least \(DurationText.format(minimum)), got \(DurationText.format(d))")
            return nil
        }
        return d
    }

    // MARK: - Environment

    /// Replaces `${NAME}` and `${NAME:-default}` with environment values; an unset variable without
    /// a default is a problem at `key`. `${secret:NAME}` (and `${secret:NAME:-default}`) marks the
    /// value secret: it is substituted the same way and registered with ``Redaction``.
    public func substitute(_ s: String, at key: String) -> String {
        guard s.contains("${") else { return s }
        var out = ""
        var rest = Substring(s)
        while let start = rest.firstRange(of: "${") {
            out += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                report(key, "unterminated ${ in \"\(s)\"")
                return s
            }
            var body = rest[start.upperBound..<end]
            let secret = body.hasPrefix("secret:")
            if secret { body = body.dropFirst("secret:".count) }
            let name: Substring
            var fallback: Substring?
            if let sep = body.firstRange(of: ":-") {
                name = body[..<sep.lowerBound]
                fallback = body[sep.upperBound...]
            } else {
                name = body
            }
            if let v = environment[String(name)] {
                out += v
                if secret { Redaction.register(v) }
            } else if let f = fallback {
                out += f
                if secret { Redaction.register(String(f)) }
            } else {
                report(key, "environment variable \(name) is not set (write ${\(name):-default} for a default)")
            }
            rest = rest[rest.index(after: end)...]
        }
        out += rest
        return out
    }
}

/// Duration text as written in configurations and logs.
public enum DurationText {
    /// The longest duration accepted: 100 years.
    public static let maximumSeconds: Double = 100 * 365.25 * 86_400

    /// Parses `"500ms"`, `"20s"`, `"2m"`, `"1h"`, `"1d"`, `"1.5s"`, `"1h30m"`, or a bare number of seconds.
    public static func parse(_ text: String) -> Duration? {
        let s = text.trimmingSpaces()
        if s.isEmpty { return nil }
        if let n = Double(s) {
            guard n >= 0, n <= maximumSeconds else { return nil }
            return .milliseconds(Int64((n * 1000).rounded()))
        }
        var total: Double = 0
        var i = s.startIndex
        var any = false
        while i < s.endIndex {
            let numStart = i
            while i < s.endIndex, s[i].isNumber || s[i] == "." { i = s.index(after: i) }
            guard numStart < i, let n = Double(s[numStart..<i]) else { return nil }
            let unitStart = i
            while i < s.endIndex, s[i].isLetter { i = s.index(after: i) }
            let factor: Double
            switch s[unitStart..<i] {
            case "ms": factor = 0.001
            case "s", "sec": factor = 1
            case "m", "min": factor = 60
            case "h": factor = 3600
            case "d": factor = 86_400
            default: return nil
            }
            total += n * factor
            any = true
        }
        // Beyond a century a duration is a typo, and it would overflow converting to milliseconds.
        guard any, total <= maximumSeconds else { return nil }
        return .milliseconds(Int64((total * 1000).rounded()))
    }

    /// Short text for a duration: `500ms`, `20s`, `2m`, `1.5s`.
    public static func format(_ d: Duration) -> String {
        let ms = d.milliseconds
        if ms % 3_600_000 == 0 && ms > 0 { return "\(ms / 3_600_000)h" }
        if ms % 60_000 == 0 && ms > 0 { return "\(ms / 60_000)m" }
        if ms % 1000 == 0 { return "\(ms / 1000)s" }
        if ms < 1000 { return "\(ms)ms" }
        return "\(Double(ms) / 1000)s"
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
