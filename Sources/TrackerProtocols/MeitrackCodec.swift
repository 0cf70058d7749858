import GatewayCore

/// Meitrack's protocol (MVT, T3xx, P88L, TC68, T622…): `$$<flag><length>,<IMEI>,<command>,<data>*<checksum>\r\n`.
///
///     $$K157,866771027160687,AAA,3,37.040231,10.042391,160412151656,A,10,11,0,48,0.8,21,1035518,774980,605|2|0010|307B,0400,…*2C\r\n
///       flag length IMEI     cmd event lat   lon       yyMMddHHmmss fix sats gsm km/h course hdop alt mileage runtime cell io …
///
/// The flag is one byte (`A`…`z`); the length (decimal) counts the bytes from the first comma to
/// the final `\r\n`; the checksum is the sum of the bytes from the first `$` to the `*`, modulo
/// 256, as two hex digits (either case). A frame is taken only when the length lands on
/// `*XX\r\n` and the checksum matches; otherwise it is a bad frame (`length`, `checksum`),
/// counted, never answered, and the stream resumes at the next `$$`. A text report whose
/// `*XX\r\n` comes before its length says is bad at once (its length is wrong), without waiting
/// for bytes that will not come; binary commands (`CCC`, `CCE`, `D00`) wait for their length.
///
/// - `AAA` (and `AFF`, one field more before the event) → `.records` with one position: time
///   `yyMMddHHmmss` (UTC), `A` a fix (`V`: mode `.noFix`, coordinates kept unless both zero),
///   satellites, speed km/h, course, HDOP, altitude (m); `event`, `gsm_signal`, `odometer` (m),
///   `runtime` (s), `io` attributes. Never answered: Meitrack devices expect no answer to a report.
/// - `CCC` (cache batch, fixed 52-byte packets, ``MeitrackBinary``) → `.records` answered
///   `@@<flag><length>,<IMEI>,CCC,<packets>*<checksum>\r\n` once every position was handled end
///   to end: the device deletes the batch from its cache only then. Its positions are marked `late`.
/// - `CCE` (cache batch, parameter-coded packets) → `.records`, marked `late`, not answered (the
///   device expects nothing: it deletes them as sent).
/// - `AAC` → answered `@@z27,<IMEI>,AAC,1*<checksum>\r\n` at once.
/// - Photo packets (`D00`) → `.control` without an answer.
/// - Everything else is a command's answer (`D03`, `C01`, `D82`…) → `.commandReply`, with its data
///   identifier and command word (``outcome(of:sent:)``); an `AAA` report with the identifier of a
///   position query (`A10`) sent also answers it.
public struct MeitrackCodec: TrackerCodec {
    public let limits: TrackerLimits
    /// The IMEI the device last gave: commands name it.
    private(set) var lastDeviceID: String?
    /// The data identifier of the next command: `A` first (what Traccar always sends), then on
    /// through `z`; the device answers with the same one.
    var commandFlag = UInt8(ascii: "A")
    /// The identifier of a position query (A10) sent: the `AAA` report with it is the answer.
    var positionQueryFlag: UInt8?

    public init(limits: TrackerLimits) { self.limits = limits }

    static let dollar = UInt8(ascii: "$"), comma = UInt8(ascii: ","), star = UInt8(ascii: "*")
    static let binaryCommands: Set<String> = ["CCC", "CCE", "D00"]

    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        let result = decodeFrame(bytes)
        if case .message(let message, _) = result, let id = message.namedDevice { lastDeviceID = id }
        return result
    }

    private mutating func decodeFrame(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        guard bytes.count >= 2 else {
            if let first = bytes.first, first != Self.dollar {
                return .invalid(TrackerFrameError("syntax", "byte before a frame"), consumed: 1, close: false)
            }
            return .needMore
        }
        guard bytes[0] == Self.dollar, bytes[1] == Self.dollar else { return skip(bytes, "syntax", "bytes before a frame") }
        // $$, the flag, the length digits, a comma.
        var index = 3
        var length = 0
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57, index < 9 {
            length = length * 10 + Int(bytes[index] - 48)
            index += 1
        }
        guard index < bytes.count else { return index < 9 ? .needMore : skip(bytes, "syntax", "length field") }
        guard bytes[2] >= 0x21, bytes[2] < 0x7F, index > 3, bytes[index] == Self.comma else { return skip(bytes, "syntax", "flag or length field") }
        let total = index + length
        guard total <= limits.maxFrameBytes else { return skip(bytes, "too_large", "a frame of \(total) bytes") }
        guard length >= 6 else { return skip(bytes, "length", "length field \(length)") }
        if let early = earlyEnd(bytes, comma: index, total: total) {
            return .invalid(TrackerFrameError("length", "the frame ends at \(early) bytes, its length says \(total)"), consumed: early, close: false)
        }
        guard bytes.count >= total else { return .needMore }
        guard bytes[total - 2] == 0x0D, bytes[total - 1] == 0x0A, bytes[total - 5] == Self.star else {
            return skip(bytes, "length", "no *XX\\r\\n where the length says")
        }
        let sum = bytes[0..<(total - 4)].reduce(UInt8(0)) { $0 &+ $1 }
        guard let high = TextNumber.nibble(bytes[total - 4]), let low = TextNumber.nibble(bytes[total - 3]), high << 4 | low == sum else {
            return .invalid(TrackerFrameError("checksum", "the bytes sum to \(WireText.hex([sum]))"), consumed: total, close: false)
        }
        let frame = UnsafeRawBufferPointer(rebasing: bytes[0..<(total - 5)])
        switch message(frame, flag: bytes[2], dataStart: index + 1) {
        case .success(let message): return .message(message, consumed: total)
        case .failure(let error): return .invalid(error, consumed: total, close: false)
        }
    }

    private func skip(_ bytes: UnsafeRawBufferPointer, _ reason: String, _ detail: String) -> TrackerDecodeResult {
        TextFraming.skip(bytes, from: 1, TrackerFrameError(reason, detail), marker: (Self.dollar, Self.dollar))
    }

    /// For a text command: where a `*XX\r\n` ends before the length says the frame does (a wrong
    /// length), so the frame is rejected without waiting; nil when there is none (yet).
    func earlyEnd(_ bytes: UnsafeRawBufferPointer, comma: Int, total: Int) -> Int? {
        let fields = TextFields(bytes, separator: Self.comma, from: comma + 1, to: min(bytes.count, comma + 24), limit: 3)
        guard fields.count >= 3, let command = TextNumber.printable(fields[1], limit: 4), !Self.binaryCommands.contains(command) else { return nil }
        var index = comma + 1
        let stop = min(bytes.count, total + 1)
        while index + 4 < stop {
            if bytes[index] == Self.star, bytes[index + 3] == 0x0D, bytes[index + 4] == 0x0A,
               TextNumber.nibble(bytes[index + 1]) != nil, TextNumber.nibble(bytes[index + 2]) != nil, index + 5 != total {
                return index + 5
            }
            index += 1
        }
        return nil
    }

    /// The frame from `$$` up to its `*`.
    mutating func message(_ frame: UnsafeRawBufferPointer, flag: UInt8, dataStart: Int) -> Result<TrackerMessage, TrackerFrameError> {
        let head = TextFields(frame, separator: Self.comma, from: dataStart, limit: 3)
        guard head.count >= 2, GL200Codec.isID(head[0]), let command = TextNumber.printable(head[1], limit: 4), command.count == 3 else {
            return .failure(TrackerFrameError("syntax", "IMEI or command field"))
        }
        let imei = String(decoding: head[0], as: UTF8.self)
        let data = head.count > 2 ? head.ranges[2] : frame.count..<frame.count
        switch command {
        case "AAA", "AFF":
            let fields = TextFields(frame, separator: Self.comma, from: data.lowerBound, to: data.upperBound)
            guard let position = Self.report(fields, offset: command == "AFF" ? 1 : 0) else {
                return .failure(TrackerFrameError("syntax", "report fields"))
            }
            var records = TrackerRecords(deviceID: imei, positions: [position], answer: nil, kind: command)
            if flag == positionQueryFlag {
                // The report a position query (A10) asked for: it carries the query's identifier.
                positionQueryFlag = nil
                records.reply = TrackerCommandReply(reference: [flag] + Array("A10".utf8), text: "position reported")
            }
            return .success(.records(records))
        case "CCC", "CCE":
            let body = UnsafeRawBufferPointer(rebasing: frame[data])
            guard let positions = command == "CCC" ? MeitrackBinary.fixedPackets(body) : MeitrackBinary.codedPackets(body) else {
                return .failure(TrackerFrameError("syntax", "\(command) packets"))
            }
            let answer = command == "CCC" ? Self.command(flag: flag, imei: imei, "CCC,\(positions.count)") : nil
            return .success(.records(TrackerRecords(deviceID: imei, positions: positions, answer: answer, kind: command)))
        case "AAC":
            return .success(.control(kind: command, deviceID: imei, answer: Self.command(flag: UInt8(ascii: "z"), imei: imei, "AAC,1")))
        case "D00":
            return .success(.control(kind: command, deviceID: imei, answer: nil))
        default:
            // A command's answer: its identifier and word, then what the device says (`OK`).
            let text = head.count > 2 ? String(decoding: frame[head.ranges[2]], as: UTF8.self) : ""
            return .success(.commandReply(kind: command, deviceID: imei, reply: TrackerCommandReply(reference: [flag] + Array(command.utf8), text: text),
                                          answer: nil))
        }
    }

    /// `event, lat, lon, yyMMddHHmmss, A|V, satellites, gsm, km/h, course, hdop, altitude, mileage, runtime, cell, io, …` after `offset` fields.
    static func report(_ fields: TextFields, offset k: Int) -> Position? {
        guard fields.count > k + 10, let latitude = fields.decimal(k + 1), let longitude = fields.decimal(k + 2) else { return nil }
        let valid = fields.is(k + 4, "A")
        guard valid || fields.is(k + 4, "V"),
              var position = TextFix.position(
                  time: TextTime.instant(fields[k + 3], "yyMMddHHmmss"), latitude: latitude, longitude: longitude, valid: valid,
                  altitude: fields.decimal(k + 10), speedKmh: fields.decimal(k + 7), course: fields.decimal(k + 8),
                  satellites: fields.integer(k + 5))
        else { return nil }
        position.hdop = fields.decimal(k + 9).flatMap { $0 >= 0 && $0 < 100 ? $0 : nil }
        for (name, field) in [("event", k), ("gsm_signal", k + 6), ("odometer", k + 11), ("runtime", k + 12)] {
            if let value = fields.integer(field) { position.attributes[name] = String(value) }
        }
        if fields.hex(k + 14) != nil, fields[k + 14].count == 4 { position.attributes["io"] = fields.text(k + 14)?.lowercased() }
        return position
    }

    /// `@@<flag><length>,<IMEI>,<text>*<checksum>\r\n`: what the server sends, checksum over `@@` … `*`.
    static func command(flag: UInt8, imei: String, _ text: String) -> [UInt8] {
        // The length counts from the comma to the \r\n: `,`, IMEI, `,`, text, `*XX\r\n`.
        let length = 1 + imei.utf8.count + 1 + text.utf8.count + 5
        var out = TextFraming.ascii("@@") + [flag] + TextFraming.ascii("\(length),\(imei),\(text)*")
        let sum = out.reduce(UInt8(0)) { $0 &+ $1 }
        out += TextFraming.ascii(WireText.hex([sum]).uppercased() + "\r\n")
        return out
    }
}
