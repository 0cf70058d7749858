/// The wire form of JT/T 808 (2011, 2013 and 2019): frames between `7E` marks, escaped, with a
/// header, a body and an XOR check code; and the server's messages built the same way.
///
///     7E | header | body | BCC | 7E            inside the marks: 7E → 7D 02, 7D → 7D 01
///
///     header, 2013:  id WORD | attributes WORD | phone BCD[6]  | serial WORD [| total WORD | index WORD]
///     header, 2019:  id WORD | attributes WORD | version BYTE | phone BCD[10] | serial WORD [| total | index]
///     attributes:    bits 0–9 body length, 10–12 encryption (10: RSA), 13 split, 14 2019 version flag
///
/// The BCC is the XOR of every unescaped byte from the header's first to the body's last. Words
/// are big-endian.
enum JT808Wire {
    static let mark: UInt8 = 0x7E
    static let escape: UInt8 = 0x7D

    /// One checked frame's header.
    struct Header: Sendable, Hashable {
        var messageID: UInt16
        var attributes: UInt16
        /// The 2019 protocol version byte; nil for a 2013 (or 2011) header.
        var version: UInt8?
        /// The terminal phone field as sent (6 bytes, or 10 in 2019).
        var phone: [UInt8]
        var serial: UInt16
        /// Split messages: the number of packets and this one's (from 1).
        var total: UInt16?
        var index: UInt16?
        /// Bytes of the header.
        var size: Int

        var bodyLength: Int { Int(attributes & 0x03FF) }
        var isSplit: Bool { attributes & 0x2000 != 0 }
        var isEncrypted: Bool { attributes & 0x1C00 != 0 }
        var is2019: Bool { attributes & 0x4000 != 0 }

        /// The header as a server answer copies it: the same form and phone; serial 0 (numbered
        /// as it goes out, ``JT808Codec/outgoing(_:)``).
        func answerHeader(messageID: UInt16, bodyLength: Int) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(17 + bodyLength)
            let attributes = UInt16(bodyLength & 0x03FF) | (is2019 ? 0x4000 : 0)
            JT808Wire.append(messageID, to: &out)
            JT808Wire.append(attributes, to: &out)
            if let version, is2019 { out.append(version) }
            out += phone
            out += [0, 0]
            return out
        }

        /// The header's bytes (without the split fields), the ``TrackerAdmission/reply`` of an
        /// admission; read back by ``parse(_:)``.
        var bytes: [UInt8] {
            var out: [UInt8] = []
            JT808Wire.append(messageID, to: &out)
            JT808Wire.append(attributes & ~0x2000, to: &out)
            if let version { out.append(version) }
            out += phone
            JT808Wire.append(serial, to: &out)
            return out
        }

        /// Reads a header at the start of an unescaped frame; nil when it is too short.
        static func parse(_ frame: UnsafeRawBufferPointer) -> Header? {
            var reader = ByteReader(frame)
            guard let id = reader.u16(), let attributes = reader.u16() else { return nil }
            var version: UInt8?
            var phoneWidth = 6
            if attributes & 0x4000 != 0 {
                guard let v = reader.u8() else { return nil }
                version = v
                phoneWidth = 10
            }
            guard let phone = reader.take(phoneWidth), let serial = reader.u16() else { return nil }
            var header = Header(messageID: id, attributes: attributes, version: version, phone: Array(phone), serial: serial,
                                total: nil, index: nil, size: 0)
            if attributes & 0x2000 != 0 {
                guard let total = reader.u16(), let index = reader.u16() else { return nil }
                header.total = total
                header.index = index
            }
            header.size = reader.offset
            return header
        }
    }

    /// Where the frame at the start of `bytes` ends, what it holds unescaped, or why not.
    enum Scan {
        /// `unescaped` is header … BCC; `consumed` includes both marks.
        case frame(unescaped: [UInt8], consumed: Int)
        case needMore
        case invalid(TrackerFrameError, consumed: Int)
    }

    /// Finds and unescapes the frame at the start of `bytes`. Bytes before a mark are skipped;
    /// an empty frame (`7E 7E`: a mark out of step) skips one mark; a frame with a bad escape is
    /// skipped whole. A frame longer than `maxFrameBytes` (escaped) is invalid before its end
    /// is awaited.
    /// `atEnd`: nothing follows `bytes` (a datagram).
    static func scan(_ bytes: UnsafeRawBufferPointer, maxFrameBytes: Int, atEnd: Bool = false) -> Scan {
        guard let first = bytes.first else { return .needMore }
        guard first == mark else {
            let next = bytes.firstIndex(of: mark) ?? bytes.count
            return .invalid(TrackerFrameError("syntax", "\(next) byte(s) before a 7E mark"), consumed: next)
        }
        let limit = min(bytes.count, maxFrameBytes)
        var end = 1
        while end < limit && bytes[end] != mark { end += 1 }
        guard end < limit else {
            if bytes.count >= maxFrameBytes {
                let next = bytes[1...].firstIndex(of: mark) ?? bytes.count
                return .invalid(TrackerFrameError("too_large", "no closing 7E within \(maxFrameBytes) bytes"), consumed: next)
            }
            return .needMore
        }
        if end == 1 {
            return .invalid(TrackerFrameError("syntax", "an empty frame (7E 7E)"), consumed: 1)
        }
        var unescaped: [UInt8] = []
        unescaped.reserveCapacity(end - 1)
        var index = 1
        while index < end {
            let byte = bytes[index]
            if byte == escape {
                let code: UInt8? = index + 1 < end ? bytes[index + 1] : nil
                guard code == 0x01 || code == 0x02, let code else {
                    guard let skip = skipBad(bytes, closingMark: end, atEnd: atEnd) else { return .needMore }
                    return .invalid(TrackerFrameError("syntax", "7D followed by \(code.map { WireText.hex([$0]) } ?? "the closing 7E")"),
                                    consumed: skip)
                }
                unescaped.append(code == 0x01 ? escape : mark)
                index += 2
            } else {
                unescaped.append(byte)
                index += 1
            }
        }
        return .frame(unescaped: unescaped, consumed: end + 1)
    }

    /// How much of a bad frame to skip: through its closing mark when that mark ends it (the
    /// next byte is another mark), else up to it (the mark opens the next frame, and the bad
    /// "frame" was bytes between frames); nil until the byte after the mark has arrived, so
    /// that the choice is the same however the stream was cut into reads. `atEnd`: no byte
    /// follows (a datagram), the mark ends the frame.
    static func skipBad(_ bytes: UnsafeRawBufferPointer, closingMark end: Int, atEnd: Bool = false) -> Int? {
        guard end + 1 < bytes.count else { return atEnd ? end + 1 : nil }
        return bytes[end + 1] == mark ? end + 1 : end
    }

    /// The XOR of `bytes`.
    static func bcc<Bytes: Sequence>(_ bytes: Bytes) -> UInt8 where Bytes.Element == UInt8 {
        bytes.reduce(0, ^)
    }

    /// A server message ready to send: `unescaped` (header … body, no check code) with the serial
    /// set, the check code appended, escaped and between marks.
    static func frame(_ unescaped: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [mark]
        out.reserveCapacity(unescaped.count + 4)
        let check = bcc(unescaped)
        for byte in unescaped { appendEscaped(byte, to: &out) }
        appendEscaped(check, to: &out)
        out.append(mark)
        return out
    }

    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        switch byte {
        case mark: out += [escape, 0x02]
        case escape: out += [escape, 0x01]
        default: out.append(byte)
        }
    }

    static func append(_ value: UInt16, to out: inout [UInt8]) {
        out.append(UInt8(value >> 8))
        out.append(UInt8(value & 0xFF))
    }

    static func append(_ value: UInt32, to out: inout [UInt8]) {
        append(UInt16(value >> 16), to: &out)
        append(UInt16(value & 0xFFFF), to: &out)
    }

    /// The offset of the serial in a server message's unescaped header.
    static func serialOffset(_ unescaped: [UInt8]) -> Int? {
        guard unescaped.count >= 12 else { return nil }
        let attributes = UInt16(unescaped[2]) << 8 | UInt16(unescaped[3])
        let offset = attributes & 0x4000 != 0 ? 15 : 10
        return unescaped.count >= offset + 2 ? offset : nil
    }

    /// The terminal's number from its phone field: the BCD digits without leading zeros (`0`
    /// when all are zero), or, for a field that is not BCD (some trackers put their IMEI there
    /// in binary), its first 14 digits as a 48-bit number followed by the Luhn digit.
    static func deviceID(phone: [UInt8]) -> String {
        if let digits = WireText.bcdDigits(phone) {
            let trimmed = digits.drop { $0 == "0" }
            return trimmed.isEmpty ? "0" : String(trimmed)
        }
        var value: UInt64 = 0
        for byte in phone.suffix(6) { value = value << 8 | UInt64(byte) }
        var digits = String(value)
        while digits.count < 14 { digits = "0" + digits }
        return digits + String(luhnDigit(digits))
    }

    /// The check digit that makes `digits` + it pass the Luhn test.
    static func luhnDigit(_ digits: String) -> Int {
        var sum = 0
        for (k, c) in digits.utf8.reversed().enumerated() {
            var d = Int(c) - 48
            if k % 2 == 0 {
                d *= 2
                if d > 9 { d -= 9 }
            }
            sum += d
        }
        return (10 - sum % 10) % 10
    }
}
