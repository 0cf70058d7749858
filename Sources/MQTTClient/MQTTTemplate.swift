/// The scanning both MQTT templates share — the sink's topic (`owntracks/{device}`) and the
/// source's device (`{-2}/{-1}`): literal text and `{name}` placeholders. Each template decides
/// what its names mean and what else it checks.
public enum MQTTTemplate {
    public enum Piece<Placeholder> {
        case literal(String)
        case placeholder(Placeholder)
    }

    /// The pieces of `template` (adjacent text joined into one literal) and its problems: an
    /// unterminated `{`, and each name `placeholder` does not know, described by `unknown`.
    public static func scan<P>(_ template: String, placeholder: (Substring) -> P?,
                               unknown: (Substring) -> String) -> (pieces: [Piece<P>], problems: [String]) {
        var pieces: [Piece<P>] = []
        var problems: [String] = []
        var literal = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            literal += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else {
                problems.append("unterminated { in \"\(template)\"")
                break
            }
            let name = rest[rest.index(after: open)..<close]
            if let p = placeholder(name) {
                if !literal.isEmpty { pieces.append(.literal(literal)); literal = "" }
                pieces.append(.placeholder(p))
            } else {
                problems.append(unknown(name))
            }
            rest = rest[rest.index(after: close)...]
        }
        literal += rest
        if !literal.isEmpty { pieces.append(.literal(literal)) }
        return (pieces, problems)
    }
}
