import Foundation
import GatewayCore
import Locking

/// How a template writes a position's time.
public enum TimeFormat: Sendable {
    /// `"2024-05-01T10:00:00.000Z"`.
    case iso8601
    /// Whole seconds since 1970 (a number).
    case epochSeconds
    /// Milliseconds since 1970 (a number).
    case epochMilliseconds
    /// A pattern such as `yyyy-MM-dd HH:mm:ss` in a zone (a string).
    case pattern(TimePattern)

    public func append(_ t: Timestamp, to out: inout [UInt8]) {
        switch self {
        case .iso8601:
            out.append(UInt8(ascii: "\""))
            t.appendISO8601(to: &out)
            out.append(UInt8(ascii: "\""))
        case .epochSeconds:
            // Floor, so 10:00:00.900 is still 10:00:00 as in the pattern form.
            let ms = t.milliseconds
            JSONWriter.appendInt(ms >= 0 ? ms / 1000 : (ms - 999) / 1000, to: &out)
        case .epochMilliseconds:
            JSONWriter.appendInt(t.milliseconds, to: &out)
        case .pattern(let p):
            out.append(UInt8(ascii: "\""))
            p.append(t, to: &out)
            out.append(UInt8(ascii: "\""))
        }
    }
}

/// A compiled date pattern: `yyyy yy MM dd HH mm ss SSS XXX` and literal text (`'…'` quotes letters).
///
/// Formats by arithmetic on the timestamp (no `DateFormatter` per position); the zone's offset is
/// looked up once per UTC hour and cached.
public final class TimePattern: Sendable {
    enum Token: Sendable, Equatable {
        case year4, year2, month, day, hour, minute, second, millis, offset
        case literal([UInt8])
    }

    let tokens: [Token]
    let zone: TimeZone
    /// Fixed offset in seconds when the zone has no daylight saving rules worth looking up.
    private let fixedOffset: Int?
    private let cache = Locked<(hour: Int64, offset: Int)>((Int64.min, 0))

    /// Compiles `pattern`; nil with a reason when it has letters that are not fields.
    public init(pattern: String, zone: TimeZone) throws(PatternError) {
        self.tokens = try TimePattern.compile(pattern)
        self.zone = zone
        self.fixedOffset = zone.identifier == "GMT" || zone.identifier == "UTC" ? 0 : nil
    }

    public struct PatternError: Error { public var message: String }

    static func compile(_ pattern: String) throws(PatternError) -> [Token] {
        var tokens: [Token] = []
        let chars = Array(pattern.utf8)
        var i = 0
        var literal: [UInt8] = []
        func flush() { if !literal.isEmpty { tokens.append(.literal(literal)); literal = [] } }
        while i < chars.count {
            let c = chars[i]
            if c == UInt8(ascii: "'") {
                i += 1
                while i < chars.count, chars[i] != UInt8(ascii: "'") { literal.append(chars[i]); i += 1 }
                i += 1
                continue
            }
            let isLetter = (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
            guard isLetter else { literal.append(c); i += 1; continue }
            var n = 1
            while i + n < chars.count, chars[i + n] == c { n += 1 }
            let run = String(decoding: chars[i..<(i + n)], as: UTF8.self)
            let token: Token
            switch run {
            case "yyyy": token = .year4
            case "yy": token = .year2
            case "MM": token = .month
            case "dd": token = .day
            case "HH": token = .hour
            case "mm": token = .minute
            case "ss": token = .second
            case "SSS": token = .millis
            case "XXX": token = .offset
            default:
                throw PatternError(message: "unsupported field \"\(run)\" (use yyyy, yy, MM, dd, HH, mm, ss, SSS, XXX; quote text with '…')")
            }
            flush()
            tokens.append(token)
            i += n
        }
        flush()
        return tokens
    }

    private func offsetSeconds(at t: Timestamp) -> Int {
        if let fixedOffset { return fixedOffset }
        let hour = t.milliseconds >= 0 ? t.milliseconds / 3_600_000 : (t.milliseconds - 3_599_999) / 3_600_000
        if let cached = cache.withLock({ $0.hour == hour ? $0.offset : nil }) { return cached }
        let offset = zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(hour) * 3600))
        cache.withLock { $0 = (hour, offset) }
        return offset
    }

    public func append(_ t: Timestamp, to out: inout [UInt8]) {
        let offset = offsetSeconds(at: t)
        let c = Timestamp(milliseconds: t.milliseconds + Int64(offset) * 1000).components
        @inline(__always) func two(_ v: Int) { out.append(UInt8(48 + v / 10 % 10)); out.append(UInt8(48 + v % 10)) }
        for token in tokens {
            switch token {
            case .year4:
                let y = max(0, min(9999, c.year))
                two(y / 100); two(y % 100)
            case .year2: two(c.year % 100)
            case .month: two(c.month)
            case .day: two(c.day)
            case .hour: two(c.hour)
            case .minute: two(c.minute)
            case .second: two(c.second)
            case .millis: out.append(UInt8(48 + c.millisecond / 100)); two(c.millisecond % 100)
            case .offset:
                if offset == 0 { out.append(UInt8(ascii: "Z")); continue }
                out.append(offset < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
                let m = abs(offset) / 60
                two(m / 60); out.append(UInt8(ascii: ":")); two(m % 60)
            case .literal(let bytes):
                for b in bytes {
                    // Literal text sits inside a JSON string.
                    if b == 0x22 || b == 0x5C { out.append(0x5C) }
                    out.append(b)
                }
            }
        }
    }

    /// Reads a time written in this pattern, in its zone (the inverse of ``append(_:to:)``): what
    /// a server reads back from a body another sender wrote with the same pattern. Nil when the
    /// text does not match the pattern or names no real time.
    public func parse(_ text: String) -> Timestamp? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in i..<(i + n) {
                guard b[k] >= 48 && b[k] <= 57 else { return nil }
                v = v * 10 + Int(b[k] - 48)
            }
            i += n
            return v
        }
        var year = 1970, month = 1, day = 1, hour = 0, minute = 0, second = 0, millis = 0
        var offset: Int?
        for token in tokens {
            switch token {
            case .year4: guard let v = digits(4) else { return nil }; year = v
            case .year2: guard let v = digits(2) else { return nil }; year = 2000 + v
            case .month: guard let v = digits(2), (1...12).contains(v) else { return nil }; month = v
            case .day: guard let v = digits(2), (1...31).contains(v) else { return nil }; day = v
            case .hour: guard let v = digits(2), v < 24 else { return nil }; hour = v
            case .minute: guard let v = digits(2), v < 60 else { return nil }; minute = v
            case .second: guard let v = digits(2), v < 61 else { return nil }; second = v
            case .millis: guard let v = digits(3) else { return nil }; millis = v
            case .offset:
                guard i < b.count else { return nil }
                if b[i] == UInt8(ascii: "Z") {
                    i += 1
                    offset = 0
                    continue
                }
                let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
                guard b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") else { return nil }
                i += 1
                guard let h = digits(2), i < b.count, b[i] == UInt8(ascii: ":") else { return nil }
                i += 1
                guard let m = digits(2), h <= 14, m < 60 else { return nil }
                offset = sign * (h * 3600 + m * 60)
            case .literal(let bytes):
                guard i + bytes.count <= b.count, Array(b[i..<(i + bytes.count)]) == bytes else { return nil }
                i += bytes.count
            }
        }
        guard i == b.count else { return nil }
        let local = Timestamp(year: year, month: month, day: day, hour: hour, minute: minute, second: second, millisecond: millis)
        // A day past the end of its month rolls over in the arithmetic: not a date.
        guard local.components.day == day else { return nil }
        if let offset { return Timestamp(milliseconds: local.milliseconds - Int64(offset) * 1000) }
        // The zone's offset at the instant: guessed from the local time read as UTC, then
        // corrected once (a clock change between the two shifts the guess by that change).
        let guess = offsetSeconds(at: local)
        let first = Timestamp(milliseconds: local.milliseconds - Int64(guess) * 1000)
        let corrected = offsetSeconds(at: first)
        return Timestamp(milliseconds: local.milliseconds - Int64(corrected) * 1000)
    }
}
