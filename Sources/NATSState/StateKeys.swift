/// Key-Value keys of per-device state: `<transform>.<device>`, each part escaped so any device
/// id (dots, spaces, `+`, non-ASCII) makes a valid key and reads back unchanged.
///
/// KV keys allow `[-/_=.a-zA-Z0-9]` and use `.` to separate tokens. Letters, digits, `-`, `_`
/// and `/` stay as they are (`owntracks/anna/phone` is readable in `nats kv ls`); every other
/// UTF-8 byte, `=` and `.` included, becomes `=XX` (uppercase hex). An empty part is `=` alone.
enum StateKeys {
    static func key(transform: String, device: String) -> String {
        escape(transform) + "." + escape(device)
    }

    /// The filter that matches every key of `transform` (for a watch).
    static func filter(transform: String) -> String { escape(transform) + ".>" }

    /// `(transform, device)` of a key this type made, or nil for any other key.
    static func parts(of key: String) -> (transform: String, device: String)? {
        let tokens = key.split(separator: ".", omittingEmptySubsequences: false)
        guard tokens.count == 2, let t = unescape(tokens[0]), let d = unescape(tokens[1]) else { return nil }
        return (t, d)
    }

    static func escape(_ part: String) -> String {
        if part.isEmpty { return "=" }
        var out: [UInt8] = []
        out.reserveCapacity(part.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in part.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "/"):
                out.append(b)
            default:
                out += [UInt8(ascii: "="), hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func unescape(_ part: Substring) -> String? {
        if part == "=" { return "" }
        var out: [UInt8] = []
        var bytes = Array(part.utf8)[...]
        while let b = bytes.popFirst() {
            guard b == UInt8(ascii: "=") else { out.append(b); continue }
            guard bytes.count >= 2, let hi = nibble(bytes.removeFirst()), let lo = nibble(bytes.removeFirst()) else { return nil }
            out.append(hi << 4 | lo)
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
