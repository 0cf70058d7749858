/// UBX frames: sync `B5 62`, class, id, a little-endian 16-bit payload length, the payload, and
/// an 8-bit Fletcher checksum (two bytes) over class, id, length and payload.
public enum UBXFrame {
    public static let sync1: UInt8 = 0xB5
    public static let sync2: UInt8 = 0x62
    /// Sync (2), class, id, length (2) and checksum (2) around the payload.
    public static let overhead = 8

    /// What the bytes at the start of a buffer are.
    public enum Check: Equatable, Sendable {
        /// A whole frame of `length` bytes with a good checksum.
        case frame(length: Int)
        /// Something that may be a frame: `needed` bytes in all before it can be checked.
        case incomplete(needed: Int)
        /// Not a frame here: no sync, a payload longer than allowed (`tooLong`), or a whole
        /// frame whose checksum fails (`badChecksum`).
        case notFrame(Reason)
    }

    /// Why bytes that started like a frame are not one.
    public enum Reason: Equatable, Sendable {
        case noSync, tooLong, badChecksum
    }

    /// Checks for a frame at the start of `bytes` whose payload is at most `maxPayload` bytes.
    ///
    /// A stated length above `maxPayload` is taken as a false sync at once, so a corrupted
    /// length cannot hold back the stream until that many bytes arrived.
    public static func check(_ bytes: UnsafeRawBufferPointer, maxPayload: Int) -> Check {
        let n = bytes.count
        guard n >= 1, bytes[0] == sync1 else { return .notFrame(.noSync) }
        guard n >= 2 else { return .incomplete(needed: 2) }
        guard bytes[1] == sync2 else { return .notFrame(.noSync) }
        guard n >= 6 else { return .incomplete(needed: 6) }
        let length = Int(bytes[4]) | Int(bytes[5]) << 8
        guard length <= maxPayload else { return .notFrame(.tooLong) }
        let total = length + overhead
        guard n >= total else { return .incomplete(needed: total) }
        let (a, b) = checksum(UnsafeRawBufferPointer(rebasing: bytes[2..<(total - 2)]))
        guard a == bytes[total - 2] && b == bytes[total - 1] else { return .notFrame(.badChecksum) }
        return .frame(length: total)
    }

    /// The 8-bit Fletcher checksum (CK_A, CK_B) of `bytes` (class through payload).
    @inline(__always)
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> (UInt8, UInt8) {
        var a: UInt8 = 0
        var b: UInt8 = 0
        for x in bytes {
            a &+= x
            b &+= a
        }
        return (a, b)
    }

    /// A whole frame of class `messageClass`, id `id` around `payload`.
    public static func encode(_ message: UBXMessageID, payload: [UInt8]) -> [UInt8] {
        precondition(payload.count <= 0xFFFF, "a UBX payload holds at most 65535 bytes")
        var out: [UInt8] = [sync1, sync2, message.messageClass, message.id, UInt8(payload.count & 0xFF), UInt8(payload.count >> 8)]
        out += payload
        let (a, b) = out.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[2...])) }
        out += [a, b]
        return out
    }
}

/// A UBX message's class and id, named as u-blox does (`NAV-PVT`).
public struct UBXMessageID: Hashable, Sendable, CustomStringConvertible {
    public let messageClass: UInt8
    public let id: UInt8

    public init(_ messageClass: UInt8, _ id: UInt8) {
        self.messageClass = messageClass
        self.id = id
    }

    public static let navPVT = UBXMessageID(0x01, 0x07)
    public static let navStatus = UBXMessageID(0x01, 0x03)
    public static let navSat = UBXMessageID(0x01, 0x35)
    public static let monRF = UBXMessageID(0x0A, 0x38)
    public static let monHW = UBXMessageID(0x0A, 0x09)
    public static let ackAck = UBXMessageID(0x05, 0x01)
    public static let ackNak = UBXMessageID(0x05, 0x00)
    public static let cfgValset = UBXMessageID(0x06, 0x8A)

    /// `NAV-PVT` for the messages this module knows, else `UBX-01-22` (class and id in hex).
    public var description: String {
        switch self {
        case .navPVT: "NAV-PVT"
        case .navStatus: "NAV-STATUS"
        case .navSat: "NAV-SAT"
        case .monRF: "MON-RF"
        case .monHW: "MON-HW"
        case .ackAck: "ACK-ACK"
        case .ackNak: "ACK-NAK"
        case .cfgValset: "CFG-VALSET"
        default: "UBX-\(Self.hex(messageClass))-\(Self.hex(id))"
        }
    }

    private static func hex(_ b: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(b >> 4)], digits[Int(b & 0x0F)]])
    }
}

/// Little-endian fields of a payload by offset; every read is bounds-checked by the caller's
/// length check first (each message type checks its payload length before reading).
struct PayloadReader {
    let bytes: UnsafeRawBufferPointer

    @inline(__always) func u1(_ o: Int) -> UInt8 { bytes[o] }
    @inline(__always) func i1(_ o: Int) -> Int8 { Int8(bitPattern: bytes[o]) }
    @inline(__always) func u2(_ o: Int) -> UInt16 { UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt16.self)) }
    @inline(__always) func i2(_ o: Int) -> Int16 { Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: Int16.self)) }
    @inline(__always) func u4(_ o: Int) -> UInt32 { UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
    @inline(__always) func i4(_ o: Int) -> Int32 { Int32(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: Int32.self)) }
}
