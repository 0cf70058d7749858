/// The two CRC-16 variants the tracker protocols use, table-driven (one lookup per byte).
///
/// Both are reflected (least significant bit first), so one table step serves each:
/// `crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]`.
///
/// | function | also known as | polynomial (reflected) | init | xorout | check ("123456789") | used by |
/// |---|---|---|---|---|---|---|
/// | ``arc(_:)`` | CRC-16/IBM, CRC-16/ARC | 0xA001 (0x8005) | 0x0000 | 0x0000 | 0xBB3D | Teltonika, over codec id … N2 |
/// | ``x25(_:)`` | CRC-16/X-25, CRC-ITU | 0x8408 (0x1021) | 0xFFFF | 0xFFFF | 0x906E | GT06, over length … serial |
public enum CRC16 {
    /// CRC-16/ARC (Teltonika's "CRC-16/IBM") of `bytes`.
    @inlinable
    public static func arc<Bytes: Sequence>(_ bytes: Bytes) -> UInt16 where Bytes.Element == UInt8 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc >> 8) ^ arcTable[Int((crc ^ UInt16(byte)) & 0xFF)]
        }
        return crc
    }

    /// CRC-16/X-25 (GT06's "CRC-ITU") of `bytes`.
    @inlinable
    public static func x25<Bytes: Sequence>(_ bytes: Bytes) -> UInt16 where Bytes.Element == UInt8 {
        var crc: UInt16 = 0xFFFF
        for byte in bytes {
            crc = (crc >> 8) ^ x25Table[Int((crc ^ UInt16(byte)) & 0xFF)]
        }
        return crc ^ 0xFFFF
    }

    @usableFromInline static let arcTable: [UInt16] = makeTable(reflectedPolynomial: 0xA001)
    @usableFromInline static let x25Table: [UInt16] = makeTable(reflectedPolynomial: 0x8408)

    /// The 256 remainders of one byte shifted through the reflected polynomial.
    static func makeTable(reflectedPolynomial: UInt16) -> [UInt16] {
        (0..<256).map { index in
            var value = UInt16(index)
            for _ in 0..<8 {
                value = value & 1 == 1 ? (value >> 1) ^ reflectedPolynomial : value >> 1
            }
            return value
        }
    }
}
