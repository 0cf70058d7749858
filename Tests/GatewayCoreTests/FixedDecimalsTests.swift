import Foundation
import Testing
import GatewayCore
import GatewayTesting

/// Numbers with a fixed count of decimals, as the position schema (and body templates) write
/// them: rounded half away from zero, trailing zeros dropped, the shortest exact form where
/// fixed-point cannot hold the value.
@Suite struct FixedDecimalsTests {
    static func text(_ v: Double, _ decimals: Int) -> String {
        var out: [UInt8] = []
        JSONWriter.appendNumber(v, decimals: decimals, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test(arguments: [
        (31.230428333, 9, "31.230428333"),
        (-93.750558641, 9, "-93.750558641"),
        (121.4737283333333, 9, "121.473728333"),
        (0.0000000005, 9, "0.000000001"),
        (-0.0000000004, 9, "0"),
        (-0.0, 9, "0"),
        (3.0, 2, "3"),
        (2.5, 3, "2.5"),
        (1.005, 2, "1"),  // 1.005 is 1.00499999999999989... in binary
        (0.125, 2, "0.13"),
        (-0.125, 2, "-0.13"),
        (99.995, 2, "100"),
        (278.02, 3, "278.02"),
        (1.673, 3, "1.673"),
        (10.100, 3, "10.1"),
        (1234567.8912345, 7, "1234567.8912345"),
        (31.2304283, 0, "31"),
        (0.5, 0, "1"),
        (1e300, 9, "1e+300"),
        (9_000_001.0, 9, "9000001"),
        (0.49999999999999994, 0, "0"),  // the largest double below one half: one half added rounds to 1
        (4_503_599_627_370_497, 0, "4503599627370497"),  // 2^52 + 1: one half added is a tie that rounds to even
        (4_503_599_627_370_495.5, 0, "4503599627370496"),
        (1.5, 18, "1.5"),
        (0.25, 19, "0.25"),
        (Double.nan, 3, "null"),
        (-Double.infinity, 9, "null"),
    ] as [(Double, Int, String)])
    func writesFixedDecimals(value: Double, decimals: Int, expected: String) {
        #expect(Self.text(value, decimals) == expected)
    }

    /// What the writer must produce, computed the slow way: the scaled value rounded half away
    /// from zero, split with integer arithmetic, written by the standard library.
    static func reference(_ v: Double, _ decimals: Int) -> String {
        let scale = pow(10, Double(decimals))
        let n = UInt64((abs(v) * scale).rounded(.toNearestOrAwayFromZero))
        let divisor = UInt64(scale)
        var text = (v < 0 && n != 0 ? "-" : "") + String(n / divisor)
        if n % divisor != 0 {
            var fraction = String(n % divisor)
            fraction = String(repeating: "0", count: decimals - fraction.count) + fraction
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text
    }

    /// Each count of decimals, the schema's (2, 3, 5, 9, with constant divisors) and others, against
    /// the reference over seeded values of every magnitude the fixed-point path takes.
    @Test func everyCountOfDecimalsMatchesTheReference() {
        var random = SeededGenerator(seed: 18)
        var mismatches: [String] = []
        for i in 0..<100_000 {
            var v = Double.random(in: -1...1, using: &random) * pow(10, Double(i % 14) - 8)
            if i % 5 == 0 { v = (v * 1000).rounded() / 1000 }  // values with trailing zeros
            if i % 11 == 0 { v = (v * 200).rounded() / 200 + 0.005 }  // ties at 2 decimals
            for d in [0, 1, 2, 3, 5, 6, 7, 9, 12, 15, 18] where abs(v) * pow(10, Double(d)) < 9e15 {
                let written = Self.text(v, d)
                if written != Self.reference(v, d) && mismatches.count < 5 {
                    mismatches.append("\(v) with \(d) decimals: \(written), expected \(Self.reference(v, d))")
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    /// Integers of every length (ids are 13 digits, counts one or two) against the standard
    /// library's text: the digit count and the eight-digit groups at each boundary.
    @Test func integersMatchTheStandardLibrary() {
        var values: [Int64] = [0, 1, 9, 10, 11, 99, 100, 1_714_521_600_000, Int64.max, Int64.min, Int64.min + 1]
        var power: Int64 = 10
        while true {
            values += [power - 1, power, power + 1, -power, -(power - 1)]
            let (next, overflow) = power.multipliedReportingOverflow(by: 10)
            if overflow { break }
            power = next
        }
        var random = SeededGenerator(seed: 20)
        for i in 0..<50_000 {
            let digits = i % 19 + 1
            let limit = digits == 19 ? Int64.max : Int64(pow(10, Double(digits))) - 1
            let v = Int64.random(in: 0...limit, using: &random)
            values.append(i % 2 == 0 ? v : -v)
        }
        var mismatches: [String] = []
        for v in values {
            var out: [UInt8] = []
            JSONWriter.appendInt(v, to: &out)
            let written = String(decoding: out, as: UTF8.self)
            if written != String(v) && mismatches.count < 5 { mismatches.append("\(v): \(written)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }
}
