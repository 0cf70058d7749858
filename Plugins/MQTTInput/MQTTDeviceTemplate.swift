import MQTTClient

/// Where a message's device id comes from: a template over the topic's levels.
///
/// `{1}`, `{2}` … are levels counted from the start, `{-1}`, `{-2}` … from the end; other text is
/// kept. `owntracks/{-2}/{-1}` on `owntracks/alice/phone` gives `owntracks/alice/phone`. A level the
/// topic does not have is empty.
public struct MQTTDeviceTemplate: Sendable, Equatable {
    enum Part: Sendable, Equatable {
        case literal(String)
        /// 1-based from the start when positive, from the end when negative.
        case level(Int)
    }

    let parts: [Part]

    /// The default: the topic's last two levels joined by `/` (its only level when it has one),
    /// which is OwnTracks' `<user>/<device>`.
    public static let lastTwoLevels = MQTTDeviceTemplate(parts: [.level(-2), .literal("/"), .level(-1)])

    /// Compiles `template`; the problems are sentences for the configuration's error list.
    public static func compile(_ template: String) -> (template: MQTTDeviceTemplate?, problems: [String]) {
        guard !template.isEmpty else { return (nil, ["must not be empty"]) }
        let (pieces, scanProblems) = MQTTTemplate.scan(template, placeholder: { name -> Int? in
            guard let n = Int(name), n != 0, abs(n) <= 1000 else { return nil }
            return n
        }, unknown: { name in
            "unknown placeholder {\(name)} (use {1}, {2} … for topic levels from the start, {-1}, {-2} … from the end)"
        })
        var problems = scanProblems
        let parts: [Part] = pieces.map { piece in
            switch piece {
            case .literal(let text): .literal(text)
            case .placeholder(let n): .level(n)
            }
        }
        if !parts.contains(where: { if case .level = $0 { true } else { false } }) && problems.isEmpty {
            problems.append("has no topic level placeholder: every message would get the same device (use {-1} for the last level)")
        }
        return problems.isEmpty ? (MQTTDeviceTemplate(parts: parts), []) : (nil, problems)
    }

    /// The device id for a message on `topic`.
    public func render(topic: String) -> String {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        func level(_ n: Int) -> Substring? {
            let i = n > 0 ? n - 1 : levels.count + n
            return levels.indices.contains(i) ? levels[i] : nil
        }
        if self == .lastTwoLevels {
            return levels.count >= 2 ? "\(levels[levels.count - 2])/\(levels[levels.count - 1])" : topic
        }
        var out = ""
        for part in parts {
            switch part {
            case .literal(let s): out += s
            case .level(let n): out += level(n) ?? ""
            }
        }
        return out
    }
}
