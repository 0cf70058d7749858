/// "Did you mean" for configuration typos: the known name closest to what was written.
public enum Suggestion {
    /// The candidate a typo of `word` most likely meant: within an edit distance of a third of
    /// the word (at least 1), one that extends it (`min_distance` → `min_distance_m`), or one it
    /// abbreviates (`ubx` → `ublox`, `cmds` → `commands`); nil when nothing is that close. A
    /// nearer edit wins over an abbreviation.
    public static func closest(to word: String, among candidates: [String]) -> String? {
        let w = Array(word.lowercased().utf8)
        let limit = max(1, w.count / 3)
        // Ranks in half steps: an edit of d is 2d, an abbreviation ranks just behind the limit.
        var best: (name: String, rank: Int)?
        for c in candidates where c != word && !c.isEmpty {
            let lower = Array(c.lowercased().utf8)
            let d = lower.starts(with: w) || w.starts(with: lower) ? 1 : distance(w, lower)
            let rank: Int
            if d <= limit && d < w.count {
                rank = 2 * d
            } else if abbreviates(w, lower) {
                rank = 2 * limit + 1
            } else {
                continue
            }
            if best.map({ rank < $0.rank }) ?? true { best = (c, rank) }
        }
        return best?.name
    }

    /// `; did you mean "NAME"?` for the candidate ``closest(to:among:)`` finds, or nothing: the
    /// tail of a configuration message.
    public static func hint(for word: String, among candidates: [String]) -> String {
        hint(closest(to: word, among: candidates))
    }

    /// `; did you mean "NAME"?`, or nothing for nil.
    public static func hint(_ name: String?) -> String {
        name.map { "; did you mean \"\($0)\"?" } ?? ""
    }

    /// Whether `a` (three letters or more) keeps the first letter of `b` and the rest of its
    /// letters in order: how names are shortened.
    static func abbreviates(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count >= 3, a.count < b.count, a.first == b.first else { return false }
        var i = 0
        for c in b where i < a.count && c == a[i] { i += 1 }
        return i == a.count
    }

    /// Levenshtein distance (insertions, deletions, substitutions, and swaps of neighbours).
    static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { current[j] = min(current[j], previous2[j - 2] + 1) }
            }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[b.count]
    }
}
