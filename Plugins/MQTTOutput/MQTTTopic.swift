import GatewayCore
import MQTTClient

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
    /// The template as written.
    public let template: String

    /// Compiles `template`; the problems are sentences for the configuration's error list.
    public static func compile(_ template: String) -> (topic: MQTTTopic?, problems: [String]) {
        var problems: [String] = []
        if template.isEmpty { return (nil, ["must not be empty"]) }
        if template.hasPrefix("$") { problems.append("topics starting with $ are reserved for the broker (\(template))") }
        let (pieces, scanProblems) = MQTTTemplate.scan(template, placeholder: { name -> Part? in
            switch name {
            case "device": .device
            case "source": .source
            case "event": .event
            default: nil
            }
        }, unknown: { name in "unknown placeholder {\(name)} (use {device}, {source} or {event})" })
        problems += scanProblems
        let parts: [Part] = pieces.map { piece in
            switch piece {
            case .literal(let text): .literal(text)
            case .placeholder(let part): part
            }
        }
        let fixed = parts.compactMap { if case .literal(let s) = $0 { s } else { nil } }.joined()
        if fixed.contains(where: { $0 == "+" || $0 == "#" }) {
            problems.append("the wildcards + and # are for subscriptions, not for a topic to publish to")
        }
        if fixed.unicodeScalars.contains(where: { $0.value == 0 }) { problems.append("must not contain NUL") }
        if fixed.utf8.count > 60_000 { problems.append("is too long for an MQTT topic") }
        return problems.isEmpty ? (MQTTTopic(parts: parts, template: template), []) : (nil, problems)
    }

    /// A template written in the code, which is valid.
    static func compiled(_ template: String) -> MQTTTopic {
        guard let topic = compile(template).topic else { preconditionFailure("the topic template \(template) is not valid") }
        return topic
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

    /// A value made safe to stand as one topic level: `/`, `+`, `#`, control characters (C0, DEL,
    /// C1) and Unicode noncharacters (which libmosquitto rejects as malformed UTF-8) become `_`;
    /// an empty value becomes `_` so no level is empty; at most 256 bytes are kept (a topic must
    /// stay under MQTT's 65,535-byte limit whatever a device id says).
    static func clean(_ value: String) -> String {
        guard !value.isEmpty else { return "_" }
        func bad(_ s: Unicode.Scalar) -> Bool {
            let v = s.value
            return s == "/" || s == "+" || s == "#" || v < 0x20 || (0x7F...0x9F).contains(v)
                || (0xFDD0...0xFDEF).contains(v) || v & 0xFFFE == 0xFFFE
        }
        var out = String.UnicodeScalarView()
        var bytes = 0
        for s in value.unicodeScalars {
            let c: Unicode.Scalar = bad(s) ? "_" : s
            bytes += String(c).utf8.count
            if bytes > 256 { break }
            out.append(c)
        }
        return String(out)
    }
}
