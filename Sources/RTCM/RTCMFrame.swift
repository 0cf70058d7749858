/// RTCM 3 transport frames: preamble `D3`, six reserved zero bits and a 10-bit payload length,
/// the payload (its first 12 bits are the message number), and a CRC-24Q over all before it.
public enum RTCMFrame {
    /// The preamble byte.
    public static let preamble: UInt8 = 0xD3
    /// Header (3 bytes) and CRC (3 bytes) around the payload.
    public static let overhead = 6
    /// The longest payload the 10-bit length allows.
    public static let maxPayload = 1023

    /// What the bytes at the start of a buffer are.
    public enum Check: Equatable, Sendable {
        /// A whole frame of `length` bytes with a good CRC.
        case frame(length: Int)
        /// The start of a frame (or of something that looks like one): `needed` bytes in all
        /// are required before it can be checked.
        case incomplete(needed: Int)
        /// Not a frame here: no preamble, reserved bits set, or (`badCRC`) a whole frame whose CRC fails.
        case notFrame(badCRC: Bool)
    }

    /// Checks for a frame at the start of `bytes`.
    public static func check(_ bytes: UnsafeRawBufferPointer) -> Check {
        guard let first = bytes.first, first == preamble else { return .notFrame(badCRC: false) }
        guard bytes.count >= 3 else { return .incomplete(needed: 3) }
        guard bytes[1] & 0xFC == 0 else { return .notFrame(badCRC: false) }
        let length = Int(bytes[1] & 0x03) << 8 | Int(bytes[2])
        let total = length + overhead
        guard bytes.count >= total else { return .incomplete(needed: total) }
        let crc = CRC24Q.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<(total - 3)]))
        let stated = UInt32(bytes[total - 3]) << 16 | UInt32(bytes[total - 2]) << 8 | UInt32(bytes[total - 1])
        return crc == stated ? .frame(length: total) : .notFrame(badCRC: true)
    }

    /// The message number of a checked frame (its payload's first 12 bits); 0 for an empty payload.
    public static func messageType(_ frame: UnsafeRawBufferPointer) -> Int {
        guard frame.count >= 5 + 3, (Int(frame[1] & 0x03) << 8 | Int(frame[2])) >= 2 else { return 0 }
        return Int(frame[3]) << 4 | Int(frame[4]) >> 4
    }

    /// A frame around `payload` (at most ``maxPayload`` bytes), for tests and tools.
    public static func encode(payload: [UInt8]) -> [UInt8] {
        precondition(payload.count <= maxPayload, "an RTCM 3 payload holds at most 1023 bytes")
        var out: [UInt8] = [preamble, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
        let crc = CRC24Q.checksum(out)
        out += [UInt8(crc >> 16), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)]
        return out
    }
}
