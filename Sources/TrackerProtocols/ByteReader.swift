/// A cursor over untrusted bytes that never reads past its end: every read returns nil instead.
///
/// The codecs parse with it so that a length field, count or offset taken from the wire can
/// never make them trap; a nil read is a frame that does not hold what it claims.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset: Int
    let end: Int

    /// Reads `bytes[range]` (clamped to the buffer).
    init(_ bytes: UnsafeRawBufferPointer, from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        let stop = min(max(0, end ?? bytes.count), bytes.count)
        self.end = stop
        self.offset = min(max(0, start), stop)
    }

    var remaining: Int { end - offset }
    var isAtEnd: Bool { offset == end }

    mutating func u8() -> UInt8? {
        guard offset < end else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Big-endian unsigned integer of `width` bytes (1...8).
    mutating func unsigned(width: Int) -> UInt64? {
        guard width >= 1, width <= 8, remaining >= width else { return nil }
        var value: UInt64 = 0
        for k in 0..<width { value = value << 8 | UInt64(bytes[offset + k]) }
        offset += width
        return value
    }

    /// Little-endian unsigned integer of `width` bytes (1...8): Meitrack's binary batches.
    mutating func littleEndian(width: Int) -> UInt64? {
        guard let value = unsigned(width: width) else { return nil }
        var swapped: UInt64 = 0
        for k in 0..<width { swapped |= (value >> (8 * UInt64(k)) & 0xFF) << (8 * UInt64(width - 1 - k)) }
        return swapped
    }

    mutating func u16() -> UInt16? { unsigned(width: 2).map { UInt16(truncatingIfNeeded: $0) } }
    mutating func u32() -> UInt32? { unsigned(width: 4).map { UInt32(truncatingIfNeeded: $0) } }
    mutating func u64() -> UInt64? { unsigned(width: 8) }
    mutating func i16() -> Int16? { u16().map { Int16(bitPattern: $0) } }
    mutating func i32() -> Int32? { u32().map { Int32(bitPattern: $0) } }

    /// The next `count` bytes as a slice of the same buffer (not copied).
    mutating func take(_ count: Int) -> Slice<UnsafeRawBufferPointer>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    /// Moves the cursor to `position` (clamped to the readable range).
    mutating func seek(_ position: Int) { offset = min(max(position, 0), end) }

    @discardableResult
    mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, remaining >= count else { return false }
        offset += count
        return true
    }

    /// The byte `ahead` positions past the cursor, without moving it.
    func peek(_ ahead: Int = 0) -> UInt8? {
        let index = offset + ahead
        guard ahead >= 0, index < end else { return nil }
        return bytes[index]
    }
}

/// Big-endian integer of `width` bytes at `offset` of `bytes`; nil when it does not fit.
func bigEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> UInt64? {
    var reader = ByteReader(bytes, from: offset)
    guard reader.offset == offset else { return nil }
    return reader.unsigned(width: width)
}
