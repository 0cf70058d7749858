/// Text helpers the codecs share: attribute values and ids written without Foundation formatters,
/// so the output is the same on every platform and locale.
enum WireText {
    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Lowercase hex of `bytes`, two digits each.
    static func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `value / 10^decimals` as exact decimal text: `scaled(12345, decimals: 3)` is `"12.345"`.
    ///
    /// Integer arithmetic only, so a millivolt reading never comes out as `12.344999`.
    static func scaled(_ value: UInt64, decimals: Int) -> String {
        guard decimals > 0 else { return String(value) }
        var divisor: UInt64 = 1
        for _ in 0..<decimals { divisor *= 10 }
        let whole = value / divisor
        var fraction = String(value % divisor)
        while fraction.count < decimals { fraction = "0" + fraction }
        return "\(whole).\(fraction)"
    }

    /// The digits of packed BCD `bytes`, two per byte, high nibble first; nil if a nibble is not 0...9.
    static func bcdDigits<Bytes: Sequence>(_ bytes: Bytes) -> String? where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        for byte in bytes {
            let high = byte >> 4, low = byte & 0x0F
            guard high <= 9, low <= 9 else { return nil }
            out.append(48 + high)
            out.append(48 + low)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `bytes` as a string when every byte is an ASCII digit and there is at least one.
    static func asciiDigits<Bytes: Collection>(_ bytes: Bytes) -> String? where Bytes.Element == UInt8 {
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes of hex text (pairs of digits, either case); nil when it is not that.
    static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 65...70: c - 55
            case 97...102: c - 87
            default: nil
            }
        }
        var k = 0
        while k < digits.count {
            guard let high = nibble(digits[k]), let low = nibble(digits[k + 1]) else { return nil }
            out.append(high << 4 | low)
            k += 2
        }
        return out
    }

    /// A device's result text: the text without surrounding spaces and line ends when it is
    /// printable UTF-8, else its bytes in hex (a binary answer).
    static func result<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let text = String(decoding: bytes, as: UTF8.self)
        let printable = !text.unicodeScalars.contains { $0 == "\u{FFFD}" || ($0.value < 0x20 && $0 != "\t" && $0 != "\r" && $0 != "\n") || $0.value == 0x7F }
        guard printable else { return hex(bytes) }
        var scalars = Substring(text)
        while let first = scalars.first, first == " " || first == "\r" || first == "\n" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\r" || last == "\n" || last == "\r\n" { scalars.removeLast() }
        return String(scalars)
    }

    /// Two decimal digits, zero-padded, as ASCII bytes.
    static func appendTwoDigits(_ value: Int, to out: inout [UInt8]) {
        let v = max(0, min(99, value))
        out.append(UInt8(48 + v / 10))
        out.append(UInt8(48 + v % 10))
    }
}
