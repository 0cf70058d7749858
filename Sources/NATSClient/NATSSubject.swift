/// NATS subject rules: dot-separated non-empty tokens without whitespace; `*` matches one token
/// and `>` (last token only) one or more.
public enum NATSSubject {
    /// Why `subject` is not a valid subject (or filter, when `wildcards`), or nil when it is.
    public static func problem(_ subject: String, wildcards: Bool) -> String? {
        if subject.isEmpty { return "a subject cannot be empty" }
        if subject.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
            return "a subject cannot contain spaces or control characters: \"\(subject)\""
        }
        let tokens = subject.split(separator: ".", omittingEmptySubsequences: false)
        for (i, t) in tokens.enumerated() {
            if t.isEmpty { return "a subject cannot have an empty token (\"..\" or a leading or trailing dot): \"\(subject)\"" }
            if t.contains("*") || t.contains(">") {
                if !wildcards { return "wildcards (* and >) cannot be published to: \"\(subject)\"" }
                if t != "*" && t != ">" { return "a wildcard must be a whole token: \"\(subject)\"" }
                if t == ">" && i != tokens.count - 1 { return "> can only be the last token: \"\(subject)\"" }
            }
        }
        return nil
    }

    /// `value` made into one publishable token: dots, wildcards, whitespace and control
    /// characters become `_`; an empty value becomes `_`.
    public static func cleanToken(_ value: String) -> String {
        if value.isEmpty { return "_" }
        var needs = false
        for u in value.utf8 where u <= 0x20 || u == 0x7F || u == UInt8(ascii: ".") || u == UInt8(ascii: "*") || u == UInt8(ascii: ">") {
            needs = true
            break
        }
        guard needs else { return value }
        return String(String.UnicodeScalarView(value.unicodeScalars.map { s in
            s.value <= 0x20 || s.value == 0x7F || s == "." || s == "*" || s == ">" || s.properties.isWhitespace ? "_" : s
        }))
    }

    /// True when every subject `filter` matches is also matched by `by` (both may have wildcards):
    /// whether a stream listening on `by` captures everything published under `filter`.
    public static func isSubset(_ filter: String, of by: String) -> Bool {
        let f = filter.split(separator: ".", omittingEmptySubsequences: false)
        let b = by.split(separator: ".", omittingEmptySubsequences: false)
        var i = 0
        while i < b.count {
            if b[i] == ">" { return i < f.count }
            guard i < f.count else { return false }
            if f[i] == ">" { return false }
            if b[i] != "*" && (f[i] == "*" || f[i] != b[i]) { return false }
            i += 1
        }
        return f.count == b.count
    }
}
