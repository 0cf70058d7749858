import GatewayCore

/// A topic template such as `owntracks/fleet/{device}`, compiled once at configuration time.
///
/// `{device}` is the position's device id (its source id when it has none), `{source}` the
/// component that produced it, `{event}` the geofence transition (`enter`, `exit`, `dwell`) or
/// `position`. Substituted values are cleaned: a device id like `/dev/ttyACM0` must not add topic
/// levels, and `+`/`#` would make the topic a filter that brokers refuse to publish to.
public struct MQTTTopic: Sendable, Equatable {
    enum Part: Sendable, Equatable {
        case literal(String)
        case device, source, event
    }

    let parts: [Part]

    /// Compiles `template`; the problems are sentences for the configuration's error list.
    public static func compile(_ template: String) -> (topic: MQTTTopic?, problems: [String]) {
        var problems: [String] = []
        if template.isEmpty { return (nil, ["must not be empty"]) }
        if template.hasPrefix("$") { problems.append("topics starting with $ are reserved for the broker (\(template))") }
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            literal += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else {
                problems.append("unterminated { in \"\(template)\"")
                break
            }
            let name = rest[rest.index(after: open)..<close]
            let part: Part?
            switch name {
            case "device": part = .device
            case "source": part = .source
            case "event": part = .event
            default:
                part = nil
                problems.append("unknown placeholder {\(name)} (use {device}, {source} or {event})")
            }
            if let part {
                if !literal.isEmpty { parts.append(.literal(literal)); literal = "" }
                parts.append(part)
            }
            rest = rest[rest.index(after: close)...]
        }
        literal += rest
        if !literal.isEmpty { parts.append(.literal(literal)) }
        let fixed = parts.compactMap { if case .literal(let s) = $0 { s } else { nil } }.joined()
        if fixed.contains(where: { $0 == "+" || $0 == "#" }) {
            problems.append("the wildcards + and # are for subscriptions, not for a topic to publish to")
        }
        if fixed.unicodeScalars.contains(where: { $0.value == 0 }) { problems.append("must not contain NUL") }
        if fixed.utf8.count > 60_000 { problems.append("is too long for an MQTT topic") }
        return problems.isEmpty ? (MQTTTopic(parts: parts), []) : (nil, problems)
    }

    /// The topic for one position.
    public func render(_ p: Position) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .literal(let s): out += s
            case .device: out += MQTTTopic.clean(p.deviceKey)
            case .source: out += MQTTTopic.clean(p.source)
            case .event: out += p.event?.kind.rawValue ?? "position"
            }
        }
        return out
    }

    /// A value made safe to stand as one topic level: `/`, `+`, `#`, NUL and other control
    /// characters become `_`; an empty value becomes `_` so no level is empty.
    static func clean(_ value: String) -> String {
        guard !value.isEmpty else { return "_" }
        let needsCleaning = value.unicodeScalars.contains { s in s == "/" || s == "+" || s == "#" || s.value < 0x20 || s.value == 0x7F }
        guard needsCleaning else { return value }
        var out = String.UnicodeScalarView()
        for s in value.unicodeScalars {
            out.append(s == "/" || s == "+" || s == "#" || s.value < 0x20 || s.value == 0x7F ? "_" : s)
        }
        return String(out)
    }
}
