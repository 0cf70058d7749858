import Locking

/// Keeps secrets out of every output channel: log lines, error messages, `validate` output, and
/// whatever else an output path passes through ``redact(_:)``.
///
/// Secrets come from two places:
/// - values registered with ``register(_:)``: what ``OptionReader/secretString(_:)`` read (passwords,
///   tokens, auth headers) and `${secret:NAME}` substitutions (see ``OptionReader/substitute(_:at:)``);
/// - passwords in URLs (`mqtt://user:pass@host`), recognised by their shape wherever they appear,
///   registered or not.
///
/// A registered value is replaced wherever it appears, so a library that echoes it back in an
/// error cannot leak it either. Values shorter than ``minimumLength`` are not registered:
/// replacing every "ab" in every line would make the log unreadable, and such a secret protects
/// nothing.
public enum Redaction {
    /// What a secret becomes.
    public static let mask = "***"
    /// Shorter registered values are ignored (see the type's documentation).
    public static let minimumLength = 4

    private static let secrets = Locked<[String]>([])

    /// Adds a secret value to redact from now on (process-wide: secrets only ever accumulate).
    public static func register(_ secret: String) {
        guard secret.utf8.count >= minimumLength else { return }
        secrets.withLock { list in
            if !list.contains(secret) {
                list.append(secret)
                // Longest first: a secret containing another is masked whole.
                list.sort { $0.utf8.count > $1.utf8.count }
            }
        }
    }

    /// Registers the password of a URL's `user:password@`, so it is masked even where a library
    /// echoes it without the rest of the URL.
    public static func registerCredentials(inURL url: String) {
        if let range = passwordRange(in: Substring(url), from: url.startIndex) { register(String(url[range])) }
    }

    /// True for a header or variable name that usually holds a credential (`Authorization`,
    /// `X-Api-Key`, `Cookie`, `DB_PASSWORD`, `ACCESS_TOKEN`…): its value is registered.
    public static func isSecretName(_ name: String) -> Bool {
        let n = name.lowercased()
        return ["auth", "token", "secret", "password", "passwd", "key", "cookie", "credential"].contains { n.contains($0) }
    }

    /// `text` with every registered secret and every URL password replaced by ``mask``.
    public static func redact(_ text: String) -> String {
        var out = text
        let list = secrets.withLock { $0 }
        for s in list where out.contains(s) {
            out = out.replacing(s, with: mask)
        }
        guard out.contains("://") else { return out }
        var result = ""
        var index = out.startIndex
        while let r = passwordRange(in: Substring(out), from: index) {
            result += out[index..<r.lowerBound]
            result += mask
            index = r.upperBound
        }
        result += out[index...]
        return result
    }

    /// The range of the next URL password (`scheme://user:PASSWORD@host`) at or after `from`.
    static func passwordRange(in text: Substring, from: String.Index) -> Range<String.Index>? {
        var search = from
        while let scheme = text[search...].firstRange(of: "://") {
            // The authority ends at the first /, ?, # or white space; the password ends at the last @ in it.
            let authorityStart = scheme.upperBound
            let authorityEnd = text[authorityStart...].firstIndex(where: { "/?# \t\"'".contains($0) }) ?? text.endIndex
            let authority = text[authorityStart..<authorityEnd]
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":"),
               text.index(after: colon) < at {
                return text.index(after: colon)..<at
            }
            search = authorityEnd
            if search == text.endIndex { return nil }
        }
        return nil
    }
}
