import GatewayCore

/// Queclink's @Track text protocol (GL200, GL300, GL500, GV55, GV300, GV350, GV500, GV600 and
/// the rest of the family): comma-separated messages ending with `$`.
///
///     +RESP:GTFRI,DE0114,865284042140479,,0,0,1,1,0.0,0,28.0,-118.268093,33.975430,20200901105954,0311,0480,3500,00D07F02,18,0,,93,0,,,20200901110000,0355$
///     header:name version unique id  name …  accuracy,km/h,course,altitude,longitude,latitude,GPS UTC time,MCC,MNC,LAC,cell … send time count
///
/// A message runs to its `$` (or, without one, to a NUL byte); over UDP the datagram's end ends
/// it. The @Track binary frames (`+RSP`, `+BSP`, `+EVT`, `+BVT`, `+INF`, `+BNF`, `+HBD`, `+CRD`,
/// `+BRD`, `+LGN`, `+ACK` not followed by `:`, or a NUL second byte) carry their length: they are
/// skipped whole as `unsupported` (never answered, so a device in binary mode keeps its reports).
///
/// Every message names its device (IMEI, or a 14-hex MEID) after the protocol version (6 or 10
/// hex digits; older firmware puts the id first). Positions come from every GPS block a report
/// holds, wherever its message type puts it: `accuracy, speed (km/h), azimuth, altitude (m),
/// longitude, latitude, GPS time (yyyyMMddHHmmss, UTC)` — a GTFRI may hold several. A block is
/// recognised by two decimal coordinates followed by a 14-digit time that is not the message's
/// send time (the second-to-last field), with numeric or empty fields before them. Accuracy 0
/// means the fix failed and the block repeats the last known one: mode `.noFix`, coordinates kept.
///
/// - `+RESP:` and `+BUFF:` with a GPS block → `.records` (kind: the message name, `GTFRI`);
///   `+BUFF` reports were kept in the device while it could not send: each is marked `late`
///   (``LateFixes``). Without a GPS block (GTINF, GTGSM, GTCAN without a fix…) → `.control`.
/// - `+ACK:GTHBD` (heartbeat) → answered `+SACK:GTHBD,<version>,<count>$` at once.
/// - Other `+ACK:` messages (the device's acknowledgement of a command) → `.commandReply`,
///   naming the command and its serial number (``outcome(of:sent:)``).
/// - With ``sack`` (the device's server acknowledgement enabled, `AT+GTSRI`/`AT+GTQSS`), every
///   message is also answered `+SACK:<count>$` (its last field): reports once their positions
///   were handled end to end, everything else at once. Without it, reports are never answered
///   (the @Track default), so the device cannot tell a stored report from a lost one.
public struct GL200Codec: TrackerCodec {
    public let limits: TrackerLimits
    /// Answer every message `+SACK:<count>$` (reports after their commit).
    public let sack: Bool
    /// Each input is one whole message (a UDP datagram).
    public let datagrams: Bool
    /// The devices' password, the first parameter of every command.
    public let password: String
    /// The serial number of the next command: FFFF first (what Traccar always sends), then down.
    var commandSerial: UInt16 = 0xFFFF

    public init(limits: TrackerLimits, sack: Bool = false, datagrams: Bool = false, password: String = "") {
        self.limits = limits
        self.sack = sack
        self.datagrams = datagrams
        self.password = password
    }

    static let plus = UInt8(ascii: "+"), dollar = UInt8(ascii: "$")

    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        let (start, leading) = TextFraming.skipBreaks(bytes)
        if let leading { return leading }
        guard bytes[start] == Self.plus else {
            return TextFraming.skip(bytes, from: start + 1, TrackerFrameError("syntax", "bytes before a message")) { $0 == Self.plus }
        }
        let frame = UnsafeRawBufferPointer(rebasing: bytes[start...])
        switch Self.binaryLength(frame) {
        case .needMore: return .needMore
        case .length(let length):
            guard length >= 4, length <= limits.maxFrameBytes else {
                return TextFraming.skip(bytes, from: start + 1, TrackerFrameError(length < 4 ? "length" : "too_large", "binary frame of \(length) bytes")) { $0 == Self.plus }
            }
            guard frame.count >= length else { return .needMore }
            return .invalid(TrackerFrameError("unsupported", "an @Track binary frame"), consumed: start + length, close: false)
        case .text:
            break
        }
        let end: Int
        switch TextFraming.find(bytes, from: start, maxFrameBytes: limits.maxFrameBytes, isEnd: { $0 == Self.dollar || $0 == 0 }) {
        case .found(let index): end = index
        case .needMore:
            guard datagrams else { return .needMore }
            end = bytes.count
        case .tooLarge:
            return TextFraming.skip(bytes, from: start + 1, TrackerFrameError("too_large", "no $ within \(limits.maxFrameBytes) bytes")) { $0 == Self.plus }
        }
        let consumed = min(bytes.count, end + 1)
        switch message(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) {
        case .success(let message): return .message(message, consumed: consumed)
        case .failure(let error): return .invalid(error, consumed: consumed, close: false)
        }
    }

    enum Framing { case text, needMore, length(Int) }

    /// Whether the frame at the start is binary, and then its length (Queclink's binary headers).
    static func binaryLength(_ frame: UnsafeRawBufferPointer) -> Framing {
        guard frame.count >= 2 else { return .needMore }
        if frame[1] == 0 {
            guard let length = bigEndian(frame, at: 2, width: 2) else { return .needMore }
            return .length(Int(length))
        }
        guard frame.count >= 5 else { return .needMore }
        let header = String(decoding: frame[0..<4], as: UTF8.self)
        let at: (offset: Int, width: Int)
        switch header {
        case "+ACK":
            guard frame[4] != UInt8(ascii: ":") else { return .text }
            at = (6, 1)
        case "+INF", "+BNF": at = (7, 2)
        case "+HBD": at = (5, 1)
        case "+CRD", "+BRD", "+LGN": at = (6, 2)
        case "+RSP", "+BSP", "+EVT", "+BVT": at = (9, 2)
        default: return .text
        }
        guard let length = bigEndian(frame, at: at.offset, width: at.width) else { return .needMore }
        return .length(Int(length))
    }

    /// One text message without its `$`.
    func message(_ text: UnsafeRawBufferPointer) -> Result<TrackerMessage, TrackerFrameError> {
        guard text.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return .failure(TrackerFrameError("syntax", "a byte that is not printable ASCII"))
        }
        let fields = TextFields(text, separator: UInt8(ascii: ","))
        let head = fields[0]
        guard let colon = head.firstIndex(of: UInt8(ascii: ":")) else { return .failure(TrackerFrameError("syntax", "no header")) }
        let kind = head[(colon + 1)...], header = head[..<colon]
        guard TextNumber.hasPrefix(kind, "GT"), kind.count <= 8, let name = TextNumber.printable(kind) else {
            // Not an @Track message (a device's banner, an AT echo): counted, not answered.
            return .success(.control(kind: "other", deviceID: nil, answer: nil))
        }
        let versioned = (fields[1].count == 6 || fields[1].count == 10) && fields.hex(1) != nil && Self.isID(fields[2])
        guard Self.isID(fields[versioned ? 2 : 1]) else { return .failure(TrackerFrameError("syntax", "unique id field")) }
        let id = String(decoding: fields[versioned ? 2 : 1], as: UTF8.self)
        let count = fields.text(fields.count - 1) ?? ""
        let acknowledgement = sack ? TextFraming.ascii("+SACK:\(count)$") : nil
        switch String(decoding: header, as: UTF8.self) {
        case "+ACK" where name == "GTHBD":
            let version = versioned ? String(decoding: fields[1], as: UTF8.self) : ""
            return .success(.control(kind: "heartbeat", deviceID: id,
                                     answer: TextFraming.ascii("+SACK:GTHBD,\(version),\(count)$") + (acknowledgement ?? [])))
        case "+RESP", "+BUFF":
            let buffered = TextNumber.equals(header, "+BUFF")
            let positions = Self.positions(fields, report: name, late: buffered)
            guard !positions.isEmpty else { return .success(.control(kind: name, deviceID: id, answer: acknowledgement)) }
            return .success(.records(TrackerRecords(deviceID: id, positions: positions, answer: acknowledgement, kind: name)))
        case "+ACK":
            // `…, [sub-command,] serial number, send time, count`: the serial names the command.
            let serial = fields.count >= 4 ? fields.text(fields.count - 3) ?? "" : ""
            let reference = Array((name.dropFirst(2) + "," + serial).utf8)
            let detail = versioned && fields.count >= 8 ? fields.text(fields.count - 4) ?? "" : ""
            return .success(.commandReply(kind: name, deviceID: id, reply: TrackerCommandReply(reference: reference, text: detail),
                                          answer: acknowledgement))
        default:
            return .success(.control(kind: name, deviceID: id, answer: acknowledgement))
        }
    }

    /// An IMEI or a MEID: 1–20 letters and digits.
    static func isID(_ field: Slice<UnsafeRawBufferPointer>) -> Bool {
        !field.isEmpty && field.count <= 20 && field.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) }
    }

    /// Every GPS block of a report, in order.
    static func positions(_ fields: TextFields, report: String, late: Bool) -> [Position] {
        var out: [Position] = []
        var index = 4
        // The last two fields are the send time and the count: a block's time is before them.
        while index + 2 < fields.count - 2 {
            guard let position = block(fields, longitude: index) else {
                index += 1
                continue
            }
            var fix = position
            fix.attributes["report"] = report
            if late { LateFixes.mark(&fix) }
            out.append(fix)
            index += 3
        }
        return out
    }

    /// The block whose longitude is field `i`, or nil when the fields there are not one.
    static func block(_ fields: TextFields, longitude i: Int) -> Position? {
        guard TextNumber.hasDot(fields[i]), TextNumber.hasDot(fields[i + 1]),
              let longitude = fields.decimal(i), let latitude = fields.decimal(i + 1),
              let time = TextTime.instant(fields[i + 2], "yyyyMMddHHmmss")
        else { return nil }
        // Accuracy, speed, azimuth and altitude: numbers, or empty.
        let accuracy = fields.integer(i - 4), speed = fields.decimal(i - 3), course = fields.decimal(i - 2), altitude = fields.decimal(i - 1)
        guard accuracy != nil || fields.isEmpty(i - 4), speed != nil || fields.isEmpty(i - 3),
              course != nil || fields.isEmpty(i - 2), altitude != nil || fields.isEmpty(i - 1),
              var position = TextFix.position(time: time, latitude: latitude, longitude: longitude, valid: (accuracy ?? 0) > 0,
                                              altitude: altitude, speedKmh: speed, course: course)
        else { return nil }
        if let accuracy { position.attributes["gps_accuracy"] = String(accuracy) }
        return position
    }
}
