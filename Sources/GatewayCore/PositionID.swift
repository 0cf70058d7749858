/// A position's id, kept as its parts until its text is needed.
///
/// Sources that number their positions (every NMEA source: `prefix` + epoch milliseconds) would
/// otherwise build, allocate and later free one string per position, on the way to a sink that
/// writes the same characters into its output anyway. Encoders write the parts directly
/// (``RawJSONWriter``); everybody else reads ``Position/id``, the text.
///
/// Two ids are equal when their texts are, whichever way each was made.
public struct PositionID: Sendable, Hashable, CustomStringConvertible {
    /// `@usableFromInline` for ``RawJSONWriter``'s inlinable writers; other modules read a
    /// numbered id through ``numberedParts``.
    @usableFromInline enum Storage: Sendable {
        case text(String)
        /// `prefix`, then `marker` unless it is 0, then `number` in decimal.
        case numbered(prefix: String, marker: UInt8, number: Int64)
    }

    @usableFromInline var storage: Storage

    /// An id with the given text.
    public init(_ text: String) { storage = .text(text) }

    /// The id `prefix` + `marker` (unless 0) + `number` in decimal, e.g. `rx-1584538100600`.
    public init(prefix: String, marker: UInt8 = 0, number: Int64) {
        storage = .numbered(prefix: prefix, marker: marker, number: number)
    }

    /// The parts of a numbered id (`marker` 0 for none), or nil for an id made from its text: what
    /// an encoder writes without building the text (PositionEncoding's `PositionJSON`).
    @inlinable package var numberedParts: (prefix: String, marker: UInt8, number: Int64)? {
        if case .numbered(let prefix, let marker, let number) = storage { return (prefix, marker, number) }
        return nil
    }

    /// The id's text.
    public var description: String {
        switch storage {
        case .text(let s): return s
        case .numbered(let prefix, let marker, let number):
            // The digits as the JSON encoder writes them (RawJSONWriter.string(_: PositionID)).
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1 + RawJSONWriter.maxNumberLength) { buf in
                guard let base = buf.baseAddress else { return prefix }
                var w = RawJSONWriter(base)
                if marker != 0 { w.byte(marker) }
                w.int(number)
                return prefix + String(decoding: UnsafeBufferPointer(start: base, count: w.count), as: UTF8.self)
            }
        }
    }

    /// True when the id has no text.
    public var isEmpty: Bool {
        if case .text(let s) = storage { return s.isEmpty }
        return false
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
