import GatewayCore

/// A JT/T 808 terminal for tests: builds its frames with an encoder of its own (header, escapes,
/// check code) and reads the server's.
public struct JT808TestTerminal {
    /// The 12 BCD digits of its phone field.
    public var phone: String
    public var serial: UInt16 = 0

    public init(phone: String) { self.phone = phone }

    /// The next frame of message `id`; `split` numbers it as a packet.
    public mutating func frame(_ id: UInt16, _ body: [UInt8], split: (total: UInt16, index: UInt16)? = nil, serial given: UInt16? = nil) -> [UInt8] {
        let serial: UInt16
        if let given { serial = given } else {
            self.serial &+= 1
            serial = self.serial
        }
        var data = Self.word(id) + Self.word(UInt16(body.count) | (split == nil ? 0 : 0x2000)) + JT808TestTerminal.bcd(phone) + Self.word(serial)
        if let split { data += Self.word(split.total) + Self.word(split.index) }
        data += body
        data.append(data.reduce(0, ^))
        var out: [UInt8] = [0x7E]
        for byte in data {
            switch byte {
            case 0x7E: out += [0x7D, 0x02]
            case 0x7D: out += [0x7D, 0x01]
            default: out.append(byte)
            }
        }
        return out + [0x7E]
    }

    public static func word(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    /// A 2013 registration: province, city, maker, model (20), terminal id (7), plate colour.
    public mutating func register(terminalID: String = "T000001") -> [UInt8] {
        frame(0x0100, [0, 0, 0, 0] + Array("MAKER".utf8) + Array("MODEL".utf8) + [UInt8](repeating: 0, count: 15)
              + Array(terminalID.utf8.prefix(7)) + [0])
    }

    /// A location: positioned, ACC on, at `lat`/`lon`, GMT+8 time `bcd` (YYMMDDhhmmss).
    public static func location(lat: Double, lon: Double, bcd: String, speedTenths: UInt16 = 0) -> [UInt8] {
        [0, 0, 0, 0, 0, 0, 0, 3] + dword(UInt32(lat * 1e6)) + dword(UInt32(lon * 1e6)) + word(12) + word(speedTenths) + word(90)
            + JT808TestTerminal.bcd(bcd) + [0x31, 1, 9]
    }

    public static func dword(_ value: UInt32) -> [UInt8] { word(UInt16(value >> 16)) + word(UInt16(value & 0xFFFF)) }

    /// A 0x0704 body of `locations` (type 0 normal, 1 stored while out of coverage).
    public static func batch(_ locations: [[UInt8]], type: UInt8 = 0) -> [UInt8] {
        var body = word(UInt16(locations.count)) + [type]
        for l in locations { body += word(UInt16(l.count)) + l }
        return body
    }

    /// The server's next frame: message id, serial, body (checks the check code).
    public static func read(_ client: LoopbackTCPClient, timeout: Duration = .seconds(10)) -> (id: UInt16, serial: UInt16, body: [UInt8])? {
        var raw: [UInt8] = []
        var started = false
        while true {
            let byte = client.read(count: 1, timeout: timeout)
            guard let b = byte.first else { return nil }
            if b == 0x7E {
                if started && !raw.isEmpty { break }
                started = true
                continue
            }
            if started { raw.append(b) }
        }
        return parse(raw)
    }

    /// A server frame between its marks (or a whole datagram, marks included): message id,
    /// serial, body; nil when its check code is wrong.
    public static func parse(_ frame: [UInt8]) -> (id: UInt16, serial: UInt16, body: [UInt8])? {
        var raw = frame
        if raw.first == 0x7E { raw.removeFirst() }
        if raw.last == 0x7E { raw.removeLast() }
        var data: [UInt8] = []
        var k = 0
        while k < raw.count {
            if raw[k] == 0x7D, k + 1 < raw.count {
                data.append(raw[k + 1] == 0x01 ? 0x7D : 0x7E)
                k += 2
            } else {
                data.append(raw[k])
                k += 1
            }
        }
        guard data.count >= 13, data.dropLast().reduce(0, ^) == data.last else { return nil }
        return (UInt16(data[0]) << 8 | UInt16(data[1]), UInt16(data[10]) << 8 | UInt16(data[11]), Array(data[12..<(data.count - 1)]))
    }

    /// Packed BCD of a digit string (two digits a byte).
    public static func bcd(_ digits: String) -> [UInt8] {
        let d = Array(digits.utf8).map { $0 - 48 }
        return stride(from: 0, to: d.count - 1, by: 2).map { d[$0] << 4 | d[$0 + 1] }
    }
}
