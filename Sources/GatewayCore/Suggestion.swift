/// "Did you mean" for configuration typos: the known name closest to what was written.
public enum Suggestion {
    /// The candidate a typo of `word` most likely meant: within an edit distance of a third of
    /// the word (at least 1), or one that extends it (`min_distance` → `min_distance_m`); nil
    /// when nothing is that close.
    public static func closest(to word: String, among candidates: [String]) -> String? {
        let w = Array(word.lowercased().utf8)
        var best: (name: String, distance: Int)?
        for c in candidates where c != word {
            let lower = c.lowercased()
            let d = lower.hasPrefix(word.lowercased()) || word.lowercased().hasPrefix(lower) ? 1 : distance(w, Array(lower.utf8))
            if d <= max(1, w.count / 3), d < w.count, best.map({ d < $0.distance }) ?? true { best = (c, d) }
        }
        return best?.name
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
