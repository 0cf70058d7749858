import GatewayCore

/// Teltonika's AVL protocol (FMB, FMC, FMM... devices): Codec 8, 8 Extended and 16 positions,
/// Codec 12 and 13 command responses, over a TCP stream or in UDP datagrams.
///
/// TCP (one codec per connection):
///
///     IMEI frame   [length: 2][IMEI: ASCII digits]                   → .identification, answer 01 / 00
///     AVL frame    [00 00 00 00][data length: 4][codec][N1][records…][N2][CRC: 4]
///                                                                    → .records, answer N1 as 4 bytes
///     keep-alive   [FF]                                              → .control("keepalive"), no answer
///
/// The CRC is CRC-16/IBM (``CRC16/arc(_:)``) over codec … N2, in the low two bytes of the last four.
/// A frame is valid only when the preamble is zero, the data length is at least 3 and fits
/// ``TrackerLimits/maxFrameBytes``, the CRC matches, N1 equals N2 and the N1 records (or
/// command responses) fill the data exactly. Teltonika has no start marker to resynchronise on,
/// so every invalid frame on TCP says `close: true`: the device reconnects and resends what was
/// not acknowledged.
///
/// UDP (each `decode` call is one whole datagram; no CRC, the IMEI is in every datagram):
///
///     [length: 2][packet id: 2][01][AVL packet id: 1][IMEI length: 2][IMEI][codec][N1][records…][N2]
///     → .records(deviceID: IMEI), answer [00 05][packet id][01][AVL packet id][N1]
///
/// Records: timestamp (8 bytes, ms since 1970), priority, GPS element (longitude and latitude
/// int32 / 10⁷ degrees, altitude int16 m, angle uint16 degrees, satellites, speed uint16 km/h),
/// then IO elements. Satellites 0 means the device has no valid fix: the coordinates are kept
/// as given but the mode is `.noFix`; otherwise `.threeD` (the device reports altitude).
///
/// IO elements become attributes; `priority` is always set and `event_io` when it is not 0.
///
/// | IO id | attribute | value |
/// |---|---|---|
/// | 1, 2, 3 | `din1`, `din2`, `din3` | `true` / `false` |
/// | 9 | `ain1` | volts (mV / 1000, 3 decimals) |
/// | 16 | `odometer` | metres |
/// | 21 | `gsm_signal` | 0…5 |
/// | 24 | `io_speed` | km/h, the device's speed IO (the position's `speed` is m/s) |
/// | 66 | `external_voltage` | volts (mV / 1000, e.g. `12.345`) |
/// | 67 | `battery_voltage` | volts (mV / 1000) |
/// | 68 | `battery_current` | amperes (mA / 1000) |
/// | 69 | `gnss_status` | 0 off … 4 sleep, as the device numbers it |
/// | 113 | `battery_level` | percent |
/// | 179, 180 | `dout1`, `dout2` | `true` / `false` |
/// | 181 | — | PDOP / 10 into ``Position/pdop`` |
/// | 182 | — | HDOP / 10 into ``Position/hdop`` |
/// | 199 | `trip_odometer` | metres |
/// | 200 | `sleep_mode` | as the device numbers it |
/// | 239 | `ignition` | `true` / `false` |
/// | 240 | `movement` | `true` / `false` |
/// | any other | `io.<id>` | unsigned decimal |
/// | NX (8 Extended) | `io.<id>` | lowercase hex of the value's bytes |
public struct TeltonikaCodec: TrackerCodec {
    /// How the device reaches the server.
    public enum Transport: Sendable, Hashable {
        /// A byte stream: IMEI frame first, then AVL frames with a CRC.
        case tcp
        /// One datagram per `decode` call, each naming the device.
        case udp
    }

    /// The transport this codec frames for.
    public let transport: Transport
    /// Bounds on frame sizes.
    public let limits: TrackerLimits
    /// TCP: whether the IMEI frame was seen (the first frame is the IMEI, every later one AVL data).
    private var identified = false

    /// The IMEI is 15 digits; a few more are tolerated, a long run is not an IMEI frame.
    static let maxIMEIDigits = 20

    /// A codec for one connection (TCP) or one listening socket (UDP).
    public init(transport: Transport, limits: TrackerLimits) {
        self.transport = transport
        self.limits = limits
    }

    /// Decodes the frame at the start of `bytes`; see the type's documentation for the layouts.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        switch transport {
        case .tcp: decodeStream(bytes)
        case .udp: decodeDatagram(bytes)
        }
    }

    // MARK: - TCP

    private mutating func decodeStream(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        guard let first = bytes.first else { return .needMore }
        // Devices send a lone 0xFF to keep the connection open; no frame starts with it.
        if first == 0xFF {
            return .message(.control(kind: "keepalive", deviceID: nil, answer: nil), consumed: 1)
        }
        return identified ? decodeAVLFrame(bytes) : decodeIMEIFrame(bytes)
    }

    private mutating func decodeIMEIFrame(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        guard let length = bigEndian(bytes, at: 0, width: 2).map(Int.init) else { return .needMore }
        guard length > 0 else {
            return Self.reject("length", "zero IMEI length (AVL data before the IMEI frame?)", consumed: 2)
        }
        if 2 + length > limits.maxFrameBytes {
            return Self.reject("too_large", "IMEI frame of \(2 + length) bytes", consumed: 2)
        }
        guard length <= Self.maxIMEIDigits else {
            return Self.reject("length", "IMEI length \(length)", consumed: 2)
        }
        guard bytes.count >= 2 + length else { return .needMore }
        guard let imei = WireText.asciiDigits(bytes[2..<(2 + length)]) else {
            return Self.reject("syntax", "IMEI is not all digits", consumed: 2 + length)
        }
        identified = true
        return .message(.identification(deviceID: imei, accepted: [0x01], refused: [0x00]), consumed: 2 + length)
    }

    private func decodeAVLFrame(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        // The preamble is checked byte by byte as it arrives: garbage is rejected without waiting.
        for index in 0..<min(4, bytes.count) where bytes[index] != 0 {
            return Self.reject("syntax", "non-zero preamble", consumed: index + 1)
        }
        guard let declared = bigEndian(bytes, at: 4, width: 4).map(Int.init) else { return .needMore }
        // 12 bytes around the data: preamble, length, CRC. Checked before waiting for the data.
        if 12 + declared > limits.maxFrameBytes {
            return Self.reject("too_large", "data length \(declared)", consumed: 8)
        }
        guard declared >= 3 else {
            return Self.reject("length", "data length \(declared) (codec, N1 and N2 need 3)", consumed: 8)
        }
        let total = 12 + declared
        guard bytes.count >= total else { return .needMore }
        let data = UnsafeRawBufferPointer(rebasing: bytes[8..<(8 + declared)])
        let crcField = bigEndian(bytes, at: 8 + declared, width: 4) ?? 0
        let crc = CRC16.arc(data)
        guard crcField == UInt64(crc) else {
            return Self.reject("checksum", "CRC field \(crcField) but data gives \(crc)", consumed: total)
        }
        switch Self.decodeData(data, deviceID: nil) {
        case .success(let message): return .message(message.tcp, consumed: total)
        case .failure(let error): return .invalid(error, consumed: total, close: true)
        }
    }

    private static func reject(_ reason: String, _ detail: String, consumed: Int) -> TrackerDecodeResult {
        .invalid(TrackerFrameError(reason, detail), consumed: max(1, consumed), close: true)
    }

    // MARK: - UDP

    private func decodeDatagram(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        guard !bytes.isEmpty else { return .needMore }
        func reject(_ reason: String, _ detail: String) -> TrackerDecodeResult {
            .invalid(TrackerFrameError(reason, detail), consumed: bytes.count, close: false)
        }
        if bytes.count > limits.maxFrameBytes {
            return reject("too_large", "datagram of \(bytes.count) bytes")
        }
        var reader = ByteReader(bytes)
        // The byte after the packet id is 01 in every datagram; Teltonika calls it "not usable",
        // so it is not checked.
        guard let length = reader.u16(), let packetID = reader.u16(), reader.u8() != nil,
            let avlPacketID = reader.u8(), let imeiLength = reader.u16().map(Int.init)
        else { return reject("length", "datagram of \(bytes.count) bytes is shorter than its header") }
        guard Int(length) == bytes.count - 2 else {
            return reject("length", "length field \(length) but \(bytes.count - 2) bytes follow it")
        }
        guard imeiLength > 0, imeiLength <= Self.maxIMEIDigits, let imeiBytes = reader.take(imeiLength),
            let imei = WireText.asciiDigits(imeiBytes)
        else { return reject("syntax", "IMEI field") }
        let data = UnsafeRawBufferPointer(rebasing: bytes[reader.offset..<bytes.count])
        guard data.count >= 3 else { return reject("length", "no AVL data after the IMEI") }
        switch Self.decodeData(data, deviceID: imei) {
        case .success(let decoded):
            // Teltonika's UDP specification says the acknowledgement echoes the packet id; Traccar
            // (TeltonikaProtocolDecoder) writes 0 in its place. The device's specification wins here.
            let answer: [UInt8] = [0x00, 0x05, UInt8(packetID >> 8), UInt8(packetID & 0xFF), 0x01, avlPacketID, decoded.count]
            return .message(decoded.udp(answer: answer), consumed: bytes.count)
        case .failure(let error):
            return .invalid(error, consumed: bytes.count, close: false)
        }
    }

    // MARK: - AVL data (codec id … N2), shared by both transports

    /// What the data of one frame held, before the transport adds its answer.
    struct DecodedData {
        enum Content { case positions([Position]), commandResponse(String) }
        var content: Content
        var count: UInt8
        var deviceID: String?

        /// TCP answers N1 as four bytes; command responses are not answered.
        var tcp: TrackerMessage {
            switch content {
            case .positions(let positions):
                return .records(TrackerRecords(deviceID: deviceID, positions: positions, answer: [0, 0, 0, count]))
            case .commandResponse(let text):
                return .commandReply(kind: "command_response", deviceID: deviceID, reply: TrackerCommandReply(text: text), answer: nil)
            }
        }

        func udp(answer: [UInt8]) -> TrackerMessage {
            switch content {
            case .positions(let positions):
                return .records(TrackerRecords(deviceID: deviceID, positions: positions, answer: answer))
            case .commandResponse(let text):
                return .commandReply(kind: "command_response", deviceID: deviceID, reply: TrackerCommandReply(text: text), answer: nil)
            }
        }
    }

    /// Decodes `codec id, N1, records…, N2` (the CRC, if any, already checked).
    static func decodeData(_ data: UnsafeRawBufferPointer, deviceID: String?) -> Result<DecodedData, TrackerFrameError> {
        guard data.count >= 3, let codec = data.first, let n1 = data.dropFirst().first, let n2 = data.last else {
            return .failure(TrackerFrameError("length", "data of \(data.count) bytes"))
        }
        guard n1 == n2 else {
            return .failure(TrackerFrameError("syntax", "N1 \(n1) and N2 \(n2) differ"))
        }
        var reader = ByteReader(data, from: 2, to: data.count - 1)
        switch codec {
        case 0x08, 0x8E, 0x10:
            guard var layout = IOLayout(codec: codec) else {
                return .failure(TrackerFrameError("unsupported", "codec 0x\(WireText.hex([codec]))"))
            }
            var records = readRecords(reader, count: n1, layout: layout)
            if case .failure = records {
                // Some firmware (FMB130 with 16-byte IO enabled) adds a group of 16-byte elements
                // after the 8-byte one. Only a frame that does not parse without that group, and
                // parses exactly with it, is read so.
                layout.hasSixteenByteGroup = true
                let withGroup = readRecords(reader, count: n1, layout: layout)
                if case .success = withGroup { records = withGroup }
            }
            return records.map { DecodedData(content: .positions($0), count: n1, deviceID: deviceID) }
        case 0x0C, 0x0D:
            // Each response: type (05 command, 06 response), size (4 bytes), `size` bytes (Codec 13
            // puts a timestamp first inside them). The responses' texts, joined, are the result.
            var texts: [String] = []
            for index in 0..<Int(n1) {
                guard reader.u8() != nil, let size = reader.u32(), let body = reader.take(Int(size)) else {
                    return .failure(TrackerFrameError("syntax", "command response \(index + 1) of \(n1) runs past the data"))
                }
                texts.append(WireText.result(codec == 0x0D ? body.dropFirst(4) : body[...]))
            }
            guard reader.isAtEnd else {
                return .failure(TrackerFrameError("syntax", "\(reader.remaining) bytes after the last command response"))
            }
            return .success(DecodedData(content: .commandResponse(texts.joined(separator: "\n")), count: n1, deviceID: deviceID))
        default:
            return .failure(TrackerFrameError("unsupported", "codec 0x\(WireText.hex([codec]))"))
        }
    }

    /// `count` records that fill the reader's data exactly.
    static func readRecords(_ data: ByteReader, count: UInt8, layout: IOLayout) -> Result<[Position], TrackerFrameError> {
        var reader = data
        var positions: [Position] = []
        positions.reserveCapacity(Int(count))
        for index in 0..<Int(count) {
            guard let position = readRecord(&reader, layout: layout) else {
                return .failure(TrackerFrameError("syntax", "record \(index + 1) of \(count) runs past the data"))
            }
            positions.append(position)
        }
        guard reader.isAtEnd else {
            return .failure(TrackerFrameError("syntax", "\(reader.remaining) bytes after the last record"))
        }
        return .success(positions)
    }

    /// Field widths of a codec's IO element section.
    struct IOLayout {
        var idWidth: Int
        var countWidth: Int
        var hasGenerationType: Bool
        var hasVariableLength: Bool
        var hasSixteenByteGroup = false

        init?(codec: UInt8) {
            switch codec {
            case 0x08: (idWidth, countWidth, hasGenerationType, hasVariableLength) = (1, 1, false, false)
            case 0x8E: (idWidth, countWidth, hasGenerationType, hasVariableLength) = (2, 2, false, true)
            case 0x10: (idWidth, countWidth, hasGenerationType, hasVariableLength) = (2, 1, true, false)
            default: return nil
            }
        }
    }

    /// One AVL record, or nil when it runs past the data.
    static func readRecord(_ reader: inout ByteReader, layout: IOLayout) -> Position? {
        guard let milliseconds = reader.u64(), let time = Int64(exactly: milliseconds),
            let priority = reader.u8(), let longitude = reader.i32(), let latitude = reader.i32(),
            let altitude = reader.i16(), let angle = reader.u16(), let satellites = reader.u8(),
            let speed = reader.u16(), let eventID = reader.unsigned(width: layout.idWidth)
        else { return nil }
        if layout.hasGenerationType {
            guard reader.u8() != nil else { return nil }
        }
        // The total element count is not checked against the groups: the groups' own counts
        // delimit the data, and the CRC and the exact end of the data already vouch for the frame.
        guard reader.unsigned(width: layout.countWidth) != nil else { return nil }

        var position = Position(
            time: Timestamp(milliseconds: time),
            latitude: Double(latitude) / 1e7, longitude: Double(longitude) / 1e7,
            altitude: Double(altitude), speed: Double(speed) / 3.6, course: Double(angle),
            mode: satellites == 0 ? .noFix : .threeD, satellites: Int(satellites))
        // `magnitude`, not `abs`: abs(Int32.min) does not fit an Int32 and traps.
        if latitude.magnitude > 900_000_000 || longitude.magnitude > 1_800_000_000 {
            // Not a place on Earth: the frame is intact (its CRC matched), its fix is not.
            position.latitude = nil
            position.longitude = nil
            position.mode = .noFix
        }
        position.attributes["priority"] = String(priority)
        if eventID != 0 { position.attributes["event_io"] = String(eventID) }

        for width in [1, 2, 4, 8] {
            guard let count = reader.unsigned(width: layout.countWidth) else { return nil }
            for _ in 0..<count {
                guard let id = reader.unsigned(width: layout.idWidth), let value = reader.unsigned(width: width) else {
                    return nil
                }
                apply(id: id, value: value, to: &position)
            }
        }
        if layout.hasSixteenByteGroup {
            guard let count = reader.unsigned(width: layout.countWidth) else { return nil }
            for _ in 0..<count {
                guard let id = reader.unsigned(width: layout.idWidth), let value = reader.take(16) else { return nil }
                position.attributes["io.\(id)"] = WireText.hex(value)
            }
        }
        if layout.hasVariableLength {
            guard let count = reader.u16() else { return nil }
            for _ in 0..<count {
                guard let id = reader.u16(), let length = reader.u16(), let value = reader.take(Int(length)) else {
                    return nil
                }
                position.attributes["io.\(id)"] = WireText.hex(value)
            }
        }
        return position
    }

    /// Names a fixed-width IO element (see the table in the type's documentation).
    static func apply(id: UInt64, value: UInt64, to position: inout Position) {
        func flag() -> String { value != 0 ? "true" : "false" }
        switch id {
        case 1: position.attributes["din1"] = flag()
        case 2: position.attributes["din2"] = flag()
        case 3: position.attributes["din3"] = flag()
        case 9: position.attributes["ain1"] = WireText.scaled(value, decimals: 3)
        case 16: position.attributes["odometer"] = String(value)
        case 21: position.attributes["gsm_signal"] = String(value)
        case 24: position.attributes["io_speed"] = String(value)
        case 66: position.attributes["external_voltage"] = WireText.scaled(value, decimals: 3)
        case 67: position.attributes["battery_voltage"] = WireText.scaled(value, decimals: 3)
        case 68: position.attributes["battery_current"] = WireText.scaled(value, decimals: 3)
        case 69: position.attributes["gnss_status"] = String(value)
        case 113: position.attributes["battery_level"] = String(value)
        case 179: position.attributes["dout1"] = flag()
        case 180: position.attributes["dout2"] = flag()
        case 181: position.pdop = Double(value) / 10
        case 182: position.hdop = Double(value) / 10
        case 199: position.attributes["trip_odometer"] = String(value)
        case 200: position.attributes["sleep_mode"] = String(value)
        case 239: position.attributes["ignition"] = flag()
        case 240: position.attributes["movement"] = flag()
        default: position.attributes["io.\(id)"] = String(value)
        }
    }
}
