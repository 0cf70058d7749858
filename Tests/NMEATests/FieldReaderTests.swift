import Foundation
import GatewayTesting
import Testing
@testable import NMEA

/// The typed field readers against a plain restatement of each field's rules, over seeded
/// field texts: valid values, near misses (signs, dots, letters, spaces, too many digits) and
/// empty fields; each field is followed by another one (which must still read as itself) or
/// ends the body.
@Suite struct FieldReaderTests {
    /// What a reader returned and whether it rejected the field.
    struct Outcome<Value: Equatable>: Equatable, CustomStringConvertible {
        var value: Value?
        var failed: Bool
        var description: String { failed ? "failed" : value.map { "\($0)" } ?? "nil" }
    }

    /// Runs `read` on the field(s) `fields` of a body, then checks the field after them reads
    /// as `42` (or that the body ended there, or, `padded`, that only empty fields follow: a
    /// field with sixteen bytes after its start is read in words).
    static func read<V: Equatable>(_ fields: String, followed: Bool, padded: Bool = false, _ read: (inout FieldReader, UnsafeRawBufferPointer) -> V?) -> Outcome<V> {
        let body = Array(("GPXXX," + fields + (followed ? ",42" : "") + (padded ? String(repeating: ",", count: 16) : "")).utf8)
        return body.withUnsafeBytes { raw in
            var f = FieldReader(body: raw)
            let v = read(&f, raw)
            let failed = f.failed
            f.failed = false
            let next = f.integer()
            #expect(next == (followed ? 42 : nil), "field after \(fields)")
            #expect(!f.failed)
            #expect(f.integer() == nil)
            return Outcome(value: failed ? nil : v, failed: failed)
        }
    }

    // MARK: - Reference rules

    /// `[+-]digits[.digits]` split into its parts, or nil when the text has another shape.
    static func numberParts(_ s: String) -> (negative: Bool, int: [Int], frac: [Int])? {
        var chars = Array(s.utf8)
        var negative = false
        if let c = chars.first, c == UInt8(ascii: "+") || c == UInt8(ascii: "-") {
            negative = c == UInt8(ascii: "-")
            chars.removeFirst()
        }
        let dot = chars.firstIndex(of: UInt8(ascii: "."))
        let intBytes = dot.map { Array(chars[..<$0]) } ?? chars
        let fracBytes = dot.map { Array(chars[($0 + 1)...]) } ?? []
        let isDigit = { (c: UInt8) in c >= 0x30 && c <= 0x39 }
        guard intBytes.allSatisfy(isDigit), fracBytes.allSatisfy(isDigit), intBytes.count + fracBytes.count > 0 else { return nil }
        return (negative, intBytes.map { Int($0) - 0x30 }, fracBytes.map { Int($0) - 0x30 })
    }

    /// Mantissa and count of decimals: every digit up to 15 of them; beyond that the first 15
    /// significant digits (an integer part that does not fit is no receiver value).
    static func mantissa(_ s: String) -> (Int, Int)? {
        guard let (negative, int, frac) = numberParts(s) else { return nil }
        var m = 0, scale = 0
        if int.count + frac.count <= 15 {
            for d in int + frac { m = m * 10 + d }
            scale = frac.count
        } else {
            var significant = 0
            for (i, d) in (int + frac).enumerated() {
                let inFraction = i >= int.count
                if significant < 15 {
                    if m != 0 || d != 0 { significant += 1 }
                    m = m * 10 + d
                    if inFraction { scale += 1 }
                } else if !inFraction {
                    return nil
                }
            }
            guard scale <= 15 else { return nil }
        }
        return (negative ? -m : m, scale)
    }

    static func decimal(_ s: String) -> Outcome<Double> {
        if s.isEmpty { return Outcome(value: nil, failed: false) }
        guard let (m, scale) = mantissa(s) else { return Outcome(value: nil, failed: true) }
        if let (negative, int, frac) = numberParts(s), int.count + frac.count <= 15 {
            // The correctly rounded value of the text, which one division of exact operands gives.
            let intText: String = int.isEmpty ? "0" : int.map { String($0) }.joined()
            let fracText: String = frac.isEmpty ? "0" : frac.map { String($0) }.joined()
            let text = (negative ? "-" : "") + intText + "." + fracText
            return Outcome(value: Double(text)!, failed: false)
        }
        return Outcome(value: Double(m) / pow(10, Double(scale)), failed: false)
    }

    static func integer(_ s: String) -> Outcome<Int> {
        if s.isEmpty { return Outcome(value: nil, failed: false) }
        let bytes = Array(s.utf8)
        guard bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return Outcome(value: nil, failed: true) }
        let significant = bytes.drop { $0 == 0x30 }
        guard significant.count <= 9 else { return Outcome(value: nil, failed: true) }
        return Outcome(value: significant.reduce(0) { $0 * 10 + Int($1) - 0x30 }, failed: false)
    }

    static func flag(_ s: String, _ allowed: String) -> Outcome<UInt8> {
        if s.isEmpty { return Outcome(value: nil, failed: false) }
        guard s.utf8.count == 1, let c = s.utf8.first, allowed.utf8.contains(c) else { return Outcome(value: nil, failed: true) }
        return Outcome(value: c, failed: false)
    }

    static func timeOfDay(_ s: String) -> Outcome<Int> {
        if s.isEmpty { return Outcome(value: nil, failed: false) }
        let b = Array(s.utf8).map { Int($0) }
        let fail = Outcome<Int>(value: nil, failed: true)
        guard b.count >= 6, b[0..<6].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return fail }
        let hh = (b[0] - 48) * 10 + b[1] - 48, mm = (b[2] - 48) * 10 + b[3] - 48, ss = (b[4] - 48) * 10 + b[5] - 48
        guard hh < 24, mm < 60, ss <= 60 else { return fail }
        var ms = 0
        if b.count > 6 {
            guard b[6] == 0x2E, b[7...].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return fail }
            for (i, d) in b[7...].prefix(3).enumerated() { ms += (d - 48) * [100, 10, 1][i] }
        }
        return Outcome(value: ((hh * 60 + mm) * 60 + ss) * 1000 + ms, failed: false)
    }

    struct Day: Equatable, CustomStringConvertible {
        var day, month, year: Int
        var description: String { "\(day)/\(month)/\(year)" }
    }

    static func date(_ s: String) -> Outcome<Day> {
        if s.isEmpty { return Outcome(value: nil, failed: false) }
        let b = Array(s.utf8).map { Int($0) - 48 }
        guard b.count == 6, b.allSatisfy({ (0...9).contains($0) }) else { return Outcome(value: nil, failed: true) }
        let d = b[0] * 10 + b[1], m = b[2] * 10 + b[3], y = b[4] * 10 + b[5]
        guard (1...31).contains(d), (1...12).contains(m) else { return Outcome(value: nil, failed: true) }
        return Outcome(value: Day(day: d, month: m, year: y), failed: false)
    }

    static func coordinate(_ value: String, _ hemisphere: String, limit: Double) -> Outcome<Double> {
        if value.isEmpty && hemisphere.isEmpty { return Outcome(value: nil, failed: false) }
        let fail = Outcome<Double>(value: nil, failed: true)
        guard let (m, scale) = mantissa(value), m >= 0, scale <= 10, hemisphere.utf8.count == 1,
              hemisphere == "N" || hemisphere == "S" else { return fail }
        let unit = Int(pow(10, Double(scale)))
        let degrees = m / (100 * unit)
        let minutes = Double(m - degrees * 100 * unit) / Double(unit)
        guard minutes < 60 else { return fail }
        let v = Double(degrees) + minutes / 60
        guard v <= limit else { return fail }
        return Outcome(value: hemisphere == "S" ? -v : v, failed: false)
    }

    // MARK: - Field texts

    /// A seeded field text: mostly number-like, with the damage receivers and links do.
    static func field(_ rng: inout SeededGenerator) -> String {
        let digits = "0123456789"
        var s = ""
        switch Int.random(in: 0..<10, using: &rng) {
        case 0: return ""
        case 1:
            // Any bytes of a small alphabet (a comma would start another field).
            let alphabet = Array("0123456789.+-xNA* ")
            for _ in 0..<Int.random(in: 1...8, using: &rng) { s.append(alphabet.randomElement(using: &rng)!) }
            return s
        case 2:
            // Long numbers (the slow path beyond 15 digits).
            for _ in 0..<Int.random(in: 12...24, using: &rng) { s.append(digits.randomElement(using: &rng)!) }
            if Bool.random(using: &rng) {
                s.insert(".", at: s.index(s.startIndex, offsetBy: Int.random(in: 0...s.count, using: &rng)))
            }
            return s
        default:
            if Int.random(in: 0..<8, using: &rng) == 0 { s.append(Bool.random(using: &rng) ? "-" : "+") }
            for _ in 0..<Int.random(in: 0...6, using: &rng) { s.append(digits.randomElement(using: &rng)!) }
            if Int.random(in: 0..<4, using: &rng) != 0 {
                s.append(".")
                for _ in 0..<Int.random(in: 0...9, using: &rng) { s.append(digits.randomElement(using: &rng)!) }
            }
            if Int.random(in: 0..<20, using: &rng) == 0 { s.append(["x", ".", "-", " "].randomElement(using: &rng)!) }
            return s
        }
    }

    static let rounds = 20_000

    @Test func decimalsFollowTheirRules() {
        var rng = SeededGenerator(seed: 11)
        for i in 0..<Self.rounds {
            let s = Self.field(&rng)
            let got = Self.read(s, followed: i % 3 != 0) { f, _ in f.decimal() }
            #expect(got == Self.decimal(s), "\(s)")
        }
    }

    @Test func integersFollowTheirRules() {
        var rng = SeededGenerator(seed: 12)
        for i in 0..<Self.rounds {
            let s = i % 2 == 0 ? Self.field(&rng) : String(Int.random(in: 0...2_000_000_000, using: &rng)) + (i % 7 == 1 ? "x" : "")
            let got = Self.read(s, followed: i % 3 != 0) { f, _ in f.integer() }
            #expect(got == Self.integer(s), "\(s)")
        }
    }

    /// Every byte next to and inside the capital letters, against each set the parser uses
    /// (the reader turns each set into a bit mask).
    @Test func flagsFollowTheirRules() {
        var rng = SeededGenerator(seed: 13)
        let texts = ["", "A", "V", "AV", "x", "N", "*", " ", "AA", "@", "[", "Z", "a", "v", "`", "{", "\u{C1}", "1"]
            + (0x41...0x5A).map { String(UnicodeScalar(UInt8($0))) }
        for i in 0..<4_000 {
            let s = texts.randomElement(using: &rng)!
            let followed = i % 3 != 0
            #expect(Self.read(s, followed: followed) { f, _ in f.flag("AV") } == Self.flag(s, "AV"), "\(s)")
            #expect(Self.read(s, followed: followed) { f, _ in f.flag("ADEFMNPRS") } == Self.flag(s, "ADEFMNPRS"), "\(s)")
            #expect(Self.read(s, followed: followed) { f, _ in f.flag("AEMSV") } == Self.flag(s, "AEMSV"), "\(s)")
            #expect(Self.read(s, followed: followed) { f, _ in f.flag("Z") } == Self.flag(s, "Z"), "\(s)")
        }
    }

    @Test func timesOfDayFollowTheirRules() {
        var rng = SeededGenerator(seed: 14)
        for i in 0..<Self.rounds {
            var s: String
            if i % 2 == 0 {
                s = Self.field(&rng)
            } else {
                s = String(format: "%02d%02d%02d", Int.random(in: 0...25, using: &rng), Int.random(in: 0...61, using: &rng), Int.random(in: 0...61, using: &rng))
                if Bool.random(using: &rng) { s += "." + String(Int.random(in: 0...99999, using: &rng)).prefix(Int.random(in: 0...5, using: &rng)) }
                if i % 11 == 1 { s += "x" }
            }
            let got = Self.read(s, followed: i % 3 != 0) { f, _ in f.timeOfDay() }
            #expect(got == Self.timeOfDay(s), "\(s)")
        }
    }

    @Test func datesFollowTheirRules() {
        var rng = SeededGenerator(seed: 15)
        for i in 0..<Self.rounds {
            var s = i % 2 == 0 ? Self.field(&rng)
                : String(format: "%02d%02d%02d", Int.random(in: 0...32, using: &rng), Int.random(in: 0...13, using: &rng), Int.random(in: 0...99, using: &rng))
            if i % 13 == 1 { s += "1" }
            let got = Self.read(s, followed: i % 3 != 0) { f, _ in f.dateDDMMYY().map { Day(day: $0.day, month: $0.month, year: $0.year) } }
            #expect(got == Self.date(s), "\(s)")
        }
    }

    @Test func coordinatesFollowTheirRules() {
        var rng = SeededGenerator(seed: 16)
        let hemispheres = ["N", "S", "", "E", "NN", "x"]
        for i in 0..<Self.rounds {
            var value: String
            if i % 2 == 0 {
                value = Self.field(&rng)
            } else {
                value = String(format: "%02d%02d", Int.random(in: 0...95, using: &rng), Int.random(in: 0...61, using: &rng))
                if Bool.random(using: &rng) { value += "." + String(Int.random(in: 0...999_999_999, using: &rng)).prefix(Int.random(in: 0...12, using: &rng)) }
            }
            let hemisphere = i % 5 == 0 ? hemispheres.randomElement(using: &rng)! : (Bool.random(using: &rng) ? "N" : "S")
            let got = Self.read(value + "," + hemisphere, followed: i % 3 != 0, padded: i % 4 < 2) { f, _ in
                f.coordinate(positive: UInt8(ascii: "N"), negative: UInt8(ascii: "S"), limit: 90)
            }
            #expect(got == Self.coordinate(value, hemisphere, limit: 90), "\(value),\(hemisphere)")
        }
    }

    /// A GSA's satellite ids (and a GSV's three counts) skipped in one pass must leave the reader
    /// where twelve (three) calls of `integer()` leave it, failed or not: ids, empty ids, bad ids,
    /// nine-digit ids, ten-digit ids (valid with leading zeros), fewer fields than skipped, and
    /// the fields after them, at every offset from the words the pass reads.
    @Test func skippedIdsAreCheckedAsIntegers() {
        var rng = SeededGenerator(seed: 19)
        let ids = ["", "", "01", "7", "32", "193", "123456789", "0000000001", "1000000000", "000000000012", "x", "1.5", " 3", "-2", "é"]
        for i in 0..<Self.rounds {
            let n = i % 4 == 3 ? 3 : 12
            let count = i % 5 == 0 ? Int.random(in: 0...(n + 2), using: &rng) : n
            var fields = (0..<count).map { _ in
                i % 3 == 0 ? ids.randomElement(using: &rng)! : ids[Int.random(in: 0...6, using: &rng)]
            }
            if i % 7 != 0 { fields += ["1.9", "2.3"] }
            let talker = String(repeating: "G", count: 1 + i % 8)  // moves the ids against the words
            let body = Array((talker + "GSA," + fields.joined(separator: ",")).utf8)
            body.withUnsafeBytes { raw in
                var f = FieldReader(body: raw)
                f.skipIntegers(n)
                var g = FieldReader(body: raw)
                for _ in 0..<n { _ = g.integer() }
                let text = fields.joined(separator: ",")
                #expect(f.failed == g.failed, "\(n): \(text)")
                #expect(f.decimal() == g.decimal() && f.decimal() == g.decimal() && f.next() == g.next(), "\(n): \(text)")
            }
        }
    }

    @Test func characterReadsTheFirstByteAndSkipsTheField() {
        for (s, expected) in [("", nil), ("T", UInt8(ascii: "T")), ("12.5", UInt8(ascii: "1")), ("xyz", UInt8(ascii: "x"))] as [(String, UInt8?)] {
            #expect(Self.read(s, followed: true) { f, _ in f.character() } == Outcome(value: expected, failed: false))
            #expect(Self.read(s, followed: false) { f, _ in f.character() } == Outcome(value: expected, failed: false))
        }
    }

    /// Sentences in a row mostly repeat the time and coordinates, byte for byte or nearly: read
    /// through the decoder's memos, each field must give what parsing it afresh gives.
    @Test func memosGiveWhatParsingGives() {
        var rng = SeededGenerator(seed: 17)
        var memos = FieldReader.Memos()
        var (time, value, hemisphere) = ("123519", "4807.038", "N")
        let digits = Array("0123456789")
        for i in 0..<Self.rounds {
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: value = Bool.random(using: &rng) ? Self.field(&rng) : String(format: "%04d.%04d", Int.random(in: 0...9059, using: &rng), Int.random(in: 0...9999, using: &rng))
            case 1: value.append(digits.randomElement(using: &rng)!)
            case 2: value = String(value.dropLast())
            case 3: hemisphere = ["N", "S", "E", "x", "", "NN"].randomElement(using: &rng)!
            case 4: time = Bool.random(using: &rng) ? Self.field(&rng) : String(format: "%06d", Int.random(in: 0...235960, using: &rng))
            case 5: time += [".", "5", "x", "0"].randomElement(using: &rng)!
            default: break  // the same texts again
            }
            let followed = i % 4 != 0
            let body = Array(("GPXXX," + time + "," + value + "," + hemisphere + (followed ? ",42" : "")).utf8)
            body.withUnsafeBytes { raw in
                var f = FieldReader(body: raw)
                let t1 = f.timeOfDay(&memos.time)
                let c1 = f.coordinate(positive: 0x4E, negative: 0x53, limit: 90, &memos.latitude)
                let (failed1, next1) = (f.failed, f.integer())
                var g = FieldReader(body: raw)
                let t2 = g.timeOfDay()
                let c2 = g.coordinate(positive: 0x4E, negative: 0x53, limit: 90)
                let (failed2, next2) = (g.failed, g.integer())
                #expect(t1 == t2 && c1 == c2 && failed1 == failed2 && next1 == next2, "\(time),\(value),\(hemisphere)")
            }
        }
        // A text that ends the body (no comma after it) is not the whole of a longer field.
        memos = FieldReader.Memos()
        for (text, expected) in [("4807.038123456,N", 48 + 7.038123456 / 60), ("4807.038123456,NN,42", nil)] as [(String, Double?)] {
            Array(("GPXXX,123519," + text).utf8).withUnsafeBytes { raw in
                var f = FieldReader(body: raw)
                _ = f.timeOfDay(&memos.time)
                #expect(f.coordinate(positive: 0x4E, negative: 0x53, limit: 90, &memos.latitude) == expected, "\(text)")
            }
        }
    }

    @Test func aBodyWithoutFieldsReadsAsEmptyFields() {
        Array("GPXXX".utf8).withUnsafeBytes { raw in
            var f = FieldReader(body: raw)
            #expect(f.decimal() == nil)
            #expect(f.integer() == nil)
            #expect(f.timeOfDay() == nil)
            #expect(f.coordinate(positive: 0x4E, negative: 0x53, limit: 90) == nil)
            #expect(!f.failed)
        }
    }
}
