import Foundation
import GatewayCore

/// One vector of the fixture files (`teltonika.txt`, `gt06.txt`, `h02.txt`, …): a frame from
/// Traccar's decoder tests, what an independent decoder read from it, and the server's answer.
struct TrackerVector: Sendable, CustomStringConvertible {
    /// `V12` for decoder vectors, `F3` for framing vectors.
    var id: String
    /// The frame's bytes (hex decoded, or the text as UTF-8); for framing vectors the stream.
    var frame: [UInt8]
    /// The frame was given as text (`frame(buffer):`), not hex.
    var isText: Bool
    var ref: RefDecode?
    /// The `ref-decode` line's JSON text, for protocols whose fields `RefDecode` does not list (JT/T 808).
    var refJSON: String?
    /// The `server-answer` line as written (nil when the vector has none).
    var serverAnswer: String?
    /// The answer when the device acknowledges every message (GL200's `server-answer(sack)`).
    var serverAnswerSack: String?
    /// Framing vectors: the first frame the stream holds.
    var expectedFrame: [UInt8]?

    var description: String { id }

    /// The answer as bytes when the line is plain hex (`0005 0000 01 22 01 (…)` is read up to the parenthesis).
    var serverAnswerBytes: [UInt8]? {
        guard let line = serverAnswer else { return nil }
        let hexPart = line.split(separator: "(").first.map(String.init) ?? line
        let compact = hexPart.replacingOccurrences(of: " ", with: "")
        guard !compact.isEmpty, compact.count % 2 == 0, compact.allSatisfy(\.isHexDigit) else { return nil }
        return TrackerVectors.bytes(hex: compact)
    }
}

/// The `ref-decode` JSON: every field any of the three files uses, all optional.
struct RefDecode: Decodable, Sendable {
    // Teltonika
    var type: String?
    var imei: String?
    var dataLength: Int?
    var frameLenOK: Bool?
    var codec: String?
    var records: Int?
    var crcIbmOK: Bool?
    var first: Record?
    var last: Record?
    var packetId: String?
    var avlPacketId: Int?
    // GT06
    var protocolName: String?
    /// GT06's serial as hex text; JT/T 808's is a number (read as its text).
    var serial: LooseText?
    var crcX25OK: Bool?
    var ref: Fix?
    // H02
    var maker: String?
    var id: String?
    var cmd: String?
    var marker: String?
    var length: Int?

    enum CodingKeys: String, CodingKey {
        case type, imei, dataLength, frameLenOK, codec, records, crcIbmOK, first, last, packetId, avlPacketId
        case protocolName = "protocol"
        case serial, crcX25OK, ref, maker, id, cmd, marker, length
    }

    /// A Teltonika record.
    struct Record: Decodable, Sendable {
        var time: String
        var priority: Int
        var lat: Double
        var lon: Double
        var alt: Int
        var angle: Int
        var sats: Int
        var speedKmh: Int
        var valid: Bool
        var eventIo: Int

        enum CodingKeys: String, CodingKey {
            case time, priority, lat, lon, alt, angle, sats, speedKmh, eventIo
            case valid = "valid(sats!=0)"
        }
    }

    /// A GT06 or H02 fix.
    struct Fix: Decodable, Sendable {
        var time: String
        var valid: Bool
        var lat: Double
        var lon: Double
        var sats: Int?
        var speedKmh: Double?
        var speedKnots: Double?
        var course: Double?
        var ignition: Bool?
        var status: String?
    }

    /// A string or a number, as text.
    struct LooseText: Decodable, Sendable {
        var text: String
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let n = try? c.decode(Int.self) { text = String(n) } else { text = try c.decode(String.self) }
        }
    }

    /// False when the vector is marked as a bad frame (wrong CRC or length field).
    var isIntact: Bool { frameLenOK != false && crcIbmOK != false && crcX25OK != false }
}

/// Loads and parses the fixture files.
enum TrackerVectors {
    static func load(_ name: String) throws -> [TrackerVector] {
        guard let url = Bundle.module.url(forResource: name, withExtension: "txt", subdirectory: "Fixtures") else {
            throw CocoaError(.fileNoSuchFile)
        }
        return try parse(String(contentsOf: url, encoding: .utf8))
    }

    /// Splits the file at `[Vn]` / `[Fn]` headings and reads each block's fields.
    static func parse(_ text: String) throws -> [TrackerVector] {
        var vectors: [TrackerVector] = []
        var block: [Substring] = []
        func flush() throws {
            defer { block = [] }
            guard let heading = block.first, heading.hasPrefix("["), let close = heading.firstIndex(of: "]") else { return }
            let id = String(heading[heading.index(after: heading.startIndex)..<close])
            var vector = TrackerVector(id: id, frame: [], isText: false)
            var index = 1
            while index < block.count {
                let line = block[index]
                if let hex = value(line, "frame(binary): ") ?? value(line, "stream: ") {
                    vector.frame = bytes(hex: hex)
                    vector.isText = false
                } else if let first = value(line, "frame(buffer): ") ?? value(line, "frame(text): ") {
                    // A text frame may span lines (SMS replies): up to the next field line.
                    var text = first
                    while index + 1 < block.count, !["traccar-asserts:", "frame-in-test:", "frame-unescaped:"].contains(where: { block[index + 1].hasPrefix($0) }) {
                        index += 1
                        text += "\n" + block[index]
                    }
                    // The bytes as sent win over their printable part (Meitrack gives both).
                    if vector.frame.isEmpty {
                        vector.frame = Array(text.utf8)
                        vector.isText = true
                    }
                } else if let json = value(line, "ref-decode: ") {
                    // Fields these protocols share; the text protocols read theirs from `refJSON`.
                    vector.ref = try? JSONDecoder().decode(RefDecode.self, from: Data(json.utf8))
                    vector.refJSON = json
                } else if let answer = value(line, "server-answer(ack bytes): ") ?? value(line, "server-answer: ") {
                    vector.serverAnswer = answer
                } else if let answer = value(line, "server-answer(sack): ") {
                    vector.serverAnswerSack = answer
                } else if let hex = value(line, "expected-frame: ") {
                    vector.expectedFrame = bytes(hex: hex)
                }
                index += 1
            }
            vectors.append(vector)
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("[V") || line.hasPrefix("[F") { try flush() }
            if line.hasPrefix("#"), block.isEmpty { continue }
            if !block.isEmpty || line.hasPrefix("[") { block.append(line) }
        }
        try flush()
        return vectors
    }

    private static func value(_ line: Substring, _ prefix: String) -> String? {
        line.hasPrefix(prefix) ? String(line.dropFirst(prefix.count)) : nil
    }

    static func bytes(hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index + 1 < digits.count {
            func nibble(_ c: UInt8) -> UInt8 {
                switch c {
                case 48...57: c - 48
                case 65...70: c - 55
                default: c - 87
                }
            }
            out.append(nibble(digits[index]) << 4 | nibble(digits[index + 1]))
            index += 2
        }
        return out
    }

    /// `2025-06-13 15:18:07.000` or `2024-11-15 15:52:07 (device time…)` as UTC; nil for `server time`.
    static func time(_ text: String) -> Timestamp? {
        let head = text.split(separator: " ")
        guard head.count >= 2, head[0].count == 10 else { return nil }
        return Timestamp(iso8601: "\(head[0])T\(head[1])Z")
    }
}
