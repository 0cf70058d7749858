import GatewayCore
import NATSClient

/// A subject with placeholders, such as `locgate.positions.{device}`: compiled once, rendered
/// per position. `{device}` is the device id (or the source id without one), `{source}` the
/// source component, `{event}` `enter`/`exit`/`dwell` for geofence events and `position`
/// otherwise. Each value is cleaned into one token (dots, wildcards and spaces become `_`).
public struct SubjectTemplate: Sendable, Hashable {
    enum Part: Sendable, Hashable {
        case literal(String)
        case device, source, event
    }

    let parts: [Part]
    /// The template as written.
    public let text: String
    /// The subjects it can produce as one filter: each token holding a placeholder becomes `*`.
    public let filter: String

    /// A template written in the code, which is valid.
    static func valid(_ text: String) -> SubjectTemplate {
        do { return try SubjectTemplate(text) } catch { preconditionFailure("the subject template \(text) is not valid: \(error.message)") }
    }

    /// Parses `text`; throws the message for the configuration error.
    public init(_ text: String) throws(TemplateError) {
        self.text = text
        var parts: [Part] = []
        var filterTokens: [String] = []
        var checkTokens: [String] = []
        for token in text.split(separator: ".", omittingEmptySubsequences: false) {
            var hasPlaceholder = false
            var literal = ""
            var check = ""
            var rest = Substring(token)
            while let open = rest.firstIndex(of: "{") {
                literal += rest[..<open]
                check += rest[..<open] + "x"
                guard let close = rest[open...].firstIndex(of: "}") else { throw TemplateError("unclosed { in \"\(text)\"") }
                let name = rest[rest.index(after: open)..<close]
                let part: Part
                switch name {
                case "device": part = .device
                case "source": part = .source
                case "event": part = .event
                default: throw TemplateError("unknown placeholder {\(name)} in \"\(text)\" (use {device}, {source} or {event})")
                }
                if !literal.isEmpty { parts.append(.literal(literal)); literal = "" }
                parts.append(part)
                hasPlaceholder = true
                rest = rest[rest.index(after: close)...]
            }
            if rest.contains("}") { throw TemplateError("unmatched } in \"\(text)\"") }
            literal += rest
            check += rest
            checkTokens.append(check)
            if !literal.isEmpty { parts.append(.literal(literal)) }
            parts.append(.literal("."))
            filterTokens.append(hasPlaceholder ? "*" : String(token))
        }
        parts.removeLast()
        // Adjacent literals merged, so rendering appends as few pieces as possible.
        var merged: [Part] = []
        for p in parts {
            if case .literal(let b) = p, case .literal(let a)? = merged.last {
                merged[merged.count - 1] = .literal(a + b)
            } else {
                merged.append(p)
            }
        }
        self.parts = merged
        filter = filterTokens.joined(separator: ".")
        // A placeholder renders as a non-empty clean value: check the subject with one in its place.
        let check = checkTokens.joined(separator: ".")
        if let problem = NATSSubject.problem(check, wildcards: false) {
            throw TemplateError(problem.replacingOccurrences(of: "\"\(check)\"", with: "\"\(text)\""))
        }
    }

    /// The subject for one position.
    public func render(_ p: Position) -> String {
        var s = ""
        s.reserveCapacity(text.count + 16)
        for part in parts {
            switch part {
            case .literal(let l): s += l
            case .device: s += NATSSubject.cleanToken(p.deviceKey)
            case .source: s += NATSSubject.cleanToken(p.source)
            case .event: s += p.event.map { $0.kind.rawValue } ?? "position"
            }
        }
        return s
    }

    public struct TemplateError: Error, Sendable {
        public var message: String
        init(_ message: String) { self.message = message }
    }
}
