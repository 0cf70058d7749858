/// A UTC instant with millisecond precision, stored as milliseconds since 1970-01-01T00:00:00Z.
///
/// Kept as an integer so the hot path needs neither Foundation's `Date` nor a formatter:
/// ISO 8601 text is written and read by hand here.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var milliseconds: Int64

    @inlinable public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    @inlinable public init(seconds: Double) { self.milliseconds = Int64((seconds * 1000).rounded()) }

    /// Epoch seconds from untrusted input: nil unless finite and within ±3,000 years of 1970
    /// (a larger value would trap converting to an integer).
    public init?(epochSeconds: Double) {
        guard epochSeconds.isFinite, abs(epochSeconds) < 1e11 else { return nil }
        self.init(seconds: epochSeconds)
    }

    @inlinable public var seconds: Double { Double(milliseconds) / 1000 }

    @inlinable public static func < (a: Timestamp, b: Timestamp) -> Bool { a.milliseconds < b.milliseconds }

    /// Builds an instant from civil UTC fields; `millisecond` may be 0...999.
    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0, millisecond: Int = 0) {
        let days = Timestamp.daysFromCivil(year: year, month: month, day: day)
        let secs = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        self.milliseconds = secs * 1000 + Int64(millisecond)
    }

    /// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Civil date for days since 1970-01-01.
    @inlinable public static func civilFromDays(_ z0: Int) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// Days since 1970-01-01 and milliseconds since that day's midnight (UTC).
    @inlinable public var dayAndTimeOfDay: (day: Int, millisecond: Int) {
        var ms = milliseconds % 86_400_000
        var days = Int(milliseconds / 86_400_000)
        if ms < 0 { ms += 86_400_000; days -= 1 }
        return (days, Int(ms))
    }

    /// Civil UTC fields of this instant.
    public var components: (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, millisecond: Int) {
        let (days, msi) = dayAndTimeOfDay
        let (y, m, d) = Timestamp.civilFromDays(days)
        return (y, m, d, msi / 3_600_000, (msi / 60_000) % 60, (msi / 1000) % 60, msi % 1000)
    }

    /// Appends `YYYY-MM-DDTHH:MM:SS.mmmZ` as ASCII bytes.
    public func appendISO8601(to out: inout [UInt8]) {
        let c = components
        @inline(__always) func two(_ v: Int) { out.append(UInt8(48 + v / 10)); out.append(UInt8(48 + v % 10)) }
        let y = max(0, min(9999, c.year))
        out.append(UInt8(48 + y / 1000)); out.append(UInt8(48 + (y / 100) % 10)); two(y % 100)
        out.append(UInt8(ascii: "-")); two(c.month); out.append(UInt8(ascii: "-")); two(c.day)
        out.append(UInt8(ascii: "T")); two(c.hour); out.append(UInt8(ascii: ":")); two(c.minute)
        out.append(UInt8(ascii: ":")); two(c.second); out.append(UInt8(ascii: "."))
        out.append(UInt8(48 + c.millisecond / 100)); two(c.millisecond % 100); out.append(UInt8(ascii: "Z"))
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    public var iso8601: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendISO8601(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    public var description: String { iso8601 }

    /// Parses ISO 8601 / RFC 3339 date-times: `2024-05-01T10:00:00Z`, fractional seconds of any
    /// length, `+hh:mm` / `-hh:mm` / `+hhmm` offsets, a space instead of `T`. Returns nil otherwise.
    public init?(iso8601 text: String) {
        var s = text
        guard let v = s.withUTF8({ Timestamp.parseISO8601($0) }) else { return nil }
        self = v
    }

    static func parseISO8601(_ b: UnsafeBufferPointer<UInt8>) -> Timestamp? {
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in 0..<n {
                let c = b[i + k]
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int(c - 48)
            }
            i += n
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(45), let month = digits(2), expect(45), let day = digits(2) else { return nil }
        guard (1...12).contains(month), (1...31).contains(day) else { return nil }
        guard i < b.count, b[i] == 84 || b[i] == 116 || b[i] == 32 else { return nil }
        i += 1
        guard let hour = digits(2), expect(58), let minute = digits(2), expect(58), let second = digits(2) else { return nil }
        guard hour < 24, minute < 60, second <= 60 else { return nil }
        var ms = 0
        if i < b.count, b[i] == 46 || b[i] == 44 {
            i += 1
            var scale = 100
            var any = false
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                ms += Int(b[i] - 48) * scale
                scale /= 10
                i += 1
                any = true
            }
            guard any else { return nil }
        }
        var offsetMinutes = 0
        if i < b.count {
            switch b[i] {
            case 90, 122: i += 1
            case 43, 45:
                let sign = b[i] == 45 ? -1 : 1
                i += 1
                guard let oh = digits(2) else { return nil }
                _ = expect(58)
                let om = digits(2) ?? 0
                offsetMinutes = sign * (oh * 60 + om)
            default: return nil
            }
        }
        guard i == b.count else { return nil }
        var t = Timestamp(year: year, month: month, day: day, hour: hour, minute: minute, second: second, millisecond: ms)
        t.milliseconds -= Int64(offsetMinutes) * 60_000
        return t
    }
}
