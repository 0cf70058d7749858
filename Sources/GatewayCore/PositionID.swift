/// A position's id, kept as its parts until its text is needed.
///
/// Sources that number their positions (every NMEA source: `prefix` + epoch milliseconds) would
/// otherwise build, allocate and later free one string per position, on the way to a sink that
/// writes the same characters into its output anyway. Encoders write the parts directly
/// (``RawJSONWriter``); everybody else reads ``Position/id``, the text.
///
/// Two ids are equal when their texts are, whichever way each was made.
public struct PositionID: Sendable, Hashable, CustomStringConvertible {
    enum Storage: Sendable {
        case text(String)
        /// `prefix`, then `marker` unless it is 0, then `number` in decimal.
        case numbered(prefix: String, marker: UInt8, number: Int64)
    }

    var storage: Storage

    /// An id with the given text.
    public init(_ text: String) { storage = .text(text) }

    /// The id `prefix` + `marker` (unless 0) + `number` in decimal, e.g. `rx-1584538100600`.
    public init(prefix: String, marker: UInt8 = 0, number: Int64) {
        storage = .numbered(prefix: prefix, marker: marker, number: number)
    }

    /// The id's text.
    public var description: String {
        switch storage {
        case .text(let s): return s
        case .numbered(let prefix, let marker, let number):
            var prefix = prefix
            return prefix.withUTF8 { pre in
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.maxNumberedTail) { tail in
                    let n = Self.writeTail(marker: marker, number: number, to: tail)
                    return String(unsafeUninitializedCapacity: pre.count + n) { out in
                        _ = out.initialize(from: pre)
                        _ = UnsafeMutableBufferPointer(rebasing: out[pre.count...]).initialize(from: tail[0..<n])
                        return pre.count + n
                    }
                }
            }
        }
    }

    /// True when the id has no text.
    public var isEmpty: Bool {
        if case .text(let s) = storage { return s.isEmpty }
        return false
    }

    /// Room the marker and number of a numbered id can take: a marker, a sign and 19 digits.
    static let maxNumberedTail = 21

    /// Writes the marker (unless 0) and the decimal number to the start of `out`; returns the count.
    @inline(__always)
    static func writeTail(marker: UInt8, number: Int64, to out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var k = 0
        if marker != 0 { out[k] = marker; k += 1 }
        if number < 0 { out[k] = UInt8(ascii: "-"); k += 1 }
        var m = number.magnitude
        var digits = 1
        var power: UInt64 = 10
        while digits < 19 && m >= power { digits += 1; power = power &* 10 }
        var i = k + digits
        let end = i
        repeat { i -= 1; out[i] = UInt8(truncatingIfNeeded: 48 &+ m % 10); m /= 10 } while i > k
        return end
    }

    public static func == (a: PositionID, b: PositionID) -> Bool {
        switch (a.storage, b.storage) {
        case (.text(let x), .text(let y)): return x == y
        case (.numbered(let p, let m, let n), .numbered(let q, let l, let o)) where m == l && p == q: return n == o
        default: return a.description == b.description
        }
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
}
