/// CRC-24Q, the checksum of RTCM 3 frames (Qualcomm's polynomial 0x1864CFB, initial value 0,
/// no reflection, no final XOR), over the frame from the `D3` preamble to the end of the payload.
public enum CRC24Q {
    /// One entry per byte value: the remainder of that byte shifted to the top of the register.
    private static let table: [UInt32] = (0..<256).map { byte -> UInt32 in
        var crc = UInt32(byte) << 16
        for _ in 0..<8 {
            crc <<= 1
            if crc & 0x100_0000 != 0 { crc ^= 0x186_4CFB }
        }
        return crc & 0xFF_FFFF
    }

    /// The CRC of `bytes`, continuing from `crc` (0 to start).
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var c = crc
        table.withUnsafeBufferPointer { t in
            for b in bytes {
                c = ((c << 8) & 0xFF_FFFF) ^ t[Int(UInt8(truncatingIfNeeded: c >> 16) ^ b)]
            }
        }
        return c
    }

    /// The CRC of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }
}
