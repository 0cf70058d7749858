/// Tests on the eight bytes of a little-endian word at once, for the parser's shortcuts (the
/// address, coordinates, skipped ids): each flags a byte by setting its high bit.
enum WordBytes {
    static let ones: UInt64 = 0x0101_0101_0101_0101
    static let highs: UInt64 = 0x8080_8080_8080_8080

    /// The high bit of each byte from `low` up to, not including, `high`, for words whose bytes
    /// are all below 0x80 (a body's printable ASCII): then the per-byte sums never carry into
    /// the next byte. ``inRangeExact(_:_:_:)`` takes any bytes.
    @inline(__always)
    static func inRange(_ w: UInt64, _ low: UInt8, _ high: UInt8) -> UInt64 {
        (w &+ ones &* UInt64(0x80 &- low)) & ~(w &+ ones &* UInt64(0x80 &- high)) & highs
    }

    /// ``inRange(_:_:_:)`` for any bytes: the high bits are masked off before the sums and a
    /// byte with its high bit set is never flagged.
    @inline(__always)
    static func inRangeExact(_ w: UInt64, _ low: UInt8, _ high: UInt8) -> UInt64 {
        inRange(w & ~highs, low, high) & ~w
    }
}
