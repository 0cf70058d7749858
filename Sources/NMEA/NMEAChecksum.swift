/// The NMEA 0183 checksum: the XOR of every byte between `$` (or `!`) and `*`.
public enum NMEAChecksum {
    /// The checksum of a sentence body (the bytes between `$` and `*`).
    public static func compute<Bytes: Sequence>(_ body: Bytes) -> UInt8 where Bytes.Element == UInt8 {
        var sum: UInt8 = 0
        for b in body { sum ^= b }
        return sum
    }

    /// The checksum of a body given as text.
    public static func compute(_ body: String) -> UInt8 {
        compute(body.utf8)
    }

    /// A complete sentence `$BODY*HH\r\n` for a body such as `PMTK220,1000`.
    ///
    /// A leading `$` on `body` is dropped, so `"$PMTK220,1000"` and `"PMTK220,1000"` give the same line.
    public static func sentence(body: String) -> String {
        var b = Substring(body)
        if b.first == "$" { b = b.dropFirst() }
        let sum = compute(b.utf8)
        return "$" + b + "*" + hex(sum) + "\r\n"
    }

    /// Two uppercase hex digits.
    static func hex(_ v: UInt8) -> String {
        let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "A", "B", "C", "D", "E", "F"]
        return String([digits[Int(v >> 4)], digits[Int(v & 0x0F)]])
    }

    /// The value of one hex digit (either case), or nil.
    @inline(__always)
    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c &- 0x30
        case 0x41...0x46: c &- 0x41 &+ 10
        case 0x61...0x66: c &- 0x61 &+ 10
        default: nil
        }
    }
}
