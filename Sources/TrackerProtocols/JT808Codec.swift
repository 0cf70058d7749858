import GatewayCore

/// JT/T 808, the standard of Chinese road-transport vehicle terminals (2011, 2013 and 2019
/// headers; ``JT808Wire`` has the frame): framed, checked, split messages put back together
/// (``JT808Split``), and answered as the standard says — positions only once committed.
///
/// A frame is valid when its escapes are, its check code matches and the body length in its
/// attributes is what the frame holds; a bad frame is skipped, counted and never answered (the
/// terminal sends it again). Every frame names its terminal (its phone field,
/// ``JT808Wire/deviceID(phone:)``), so every message carries a `deviceID`.
///
/// Messages (kinds are the message ids, `0x0200`, for `messages.<kind>`):
/// - 0x0100 registration, 0x0102 authentication, 0x0003 deregistration → ``TrackerMessage/admission(_:)``:
///   the source decides, then ``answer(_:_:)`` writes 0x8100 (result and the code) or 0x8001.
/// - 0x0200 location, 0x0201 position query answer, 0x0704 batch (type 1, stored while out of
///   coverage: each position marked `late`), vendor 0x0210 batch → `.records`, answered 0x8001
///   once every position was handled. A batch item that is no location (cut short, off the
///   Earth) is counted (``TrackerRecords/undecoded``) and the others kept; a message with no
///   location at all is answered at once as `undecoded` (`messages.undecoded`), as is any
///   message whose body does not hold what its id says.
/// - 0x0001 terminal general response (the answer to a command) → `.control`, never answered.
/// - 0x0801 multimedia upload → `.control` answered 0x8800 (nothing to send again): locgate
///   does not keep media.
/// - An encrypted body (attribute bits 10–12) → `.control("encrypted")` answered 0x8001 with
///   result 3, not supported.
/// - Every other message → `.control`, answered 0x8001 at once.
///
/// Server messages are numbered as they go out (``outgoing(_:)``): 0 for the first on a
/// connection (per terminal over UDP), +1 for each further one.
public struct JT808Codec: TrackerCodec {
    /// How the codec reads and answers; the `jt808` source's options.
    public struct Options: Sendable, Hashable {
        public var limits: TrackerLimits
        /// The device clock's offset from UTC in seconds (the protocol's default, GMT+8: 28,800).
        public var timeZoneOffsetSeconds: Int
        /// The datum of the terminals' coordinates (WGS84; some send GCJ-02).
        public var datum: Datum
        /// Bytes of split-message packets kept at once.
        public var maxSplitBytes: Int
        /// Split messages kept at once.
        public var maxSplitMessages: Int
        /// A split message not complete this long after its first packet is dropped.
        public var splitTimeoutMilliseconds: Int64
        /// How often missing packets are asked for (0x8003) before the message is dropped; 0
        /// never asks (UDP: a datagram's answer has no connection to go back on).
        public var splitRequests: Int

        public init(limits: TrackerLimits, timeZoneOffsetSeconds: Int = 8 * 3600, datum: Datum = .wgs84,
                    maxSplitBytes: Int = 262_144, maxSplitMessages: Int = 64, splitTimeoutMilliseconds: Int64 = 60_000,
                    splitRequests: Int = 3) {
            self.limits = limits
            self.timeZoneOffsetSeconds = timeZoneOffsetSeconds
            self.datum = datum
            self.maxSplitBytes = maxSplitBytes
            self.maxSplitMessages = maxSplitMessages
            self.splitTimeoutMilliseconds = splitTimeoutMilliseconds
            self.splitRequests = splitRequests
        }
    }

    public let options: Options
    private let location: JT808Location
    private var split: JT808Split
    /// The next serial of server messages, per terminal phone field.
    private var serials: [[UInt8]: UInt16] = [:]
    /// The header of the last good frame: commands go in the terminal's own form and phone.
    private(set) var lastHeader: JT808Wire.Header?
    /// How much room each terminal's split packets may take (the listener's say); nil: all.
    private var room: (@Sendable (String) -> TrackerPieceRoom)?
    /// Terminals numbered at most (a UDP codec serves every terminal; past this it starts again).
    private static let maxSerialTerminals = 4_096

    public init(options: Options) {
        self.options = options
        location = JT808Location(timeZoneOffsetSeconds: options.timeZoneOffsetSeconds, datum: options.datum)
        split = JT808Split(limits: .init(maxBytes: options.maxSplitBytes, maxMessages: options.maxSplitMessages,
                                         timeoutMilliseconds: options.splitTimeoutMilliseconds, maxRequests: options.splitRequests))
    }

    // MARK: - Decoding

    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        decode(bytes, now: now, atEnd: false)
    }

    public mutating func decodeLast(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        decode(bytes, now: now, atEnd: true)
    }

    public mutating func limitPieces(by room: @escaping @Sendable (_ deviceID: String) -> TrackerPieceRoom) {
        self.room = room
    }

    /// `atEnd`: nothing follows `bytes`, so a bad frame is skipped through its closing mark.
    private mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp, atEnd: Bool) -> TrackerDecodeResult {
        switch JT808Wire.scan(bytes, maxFrameBytes: options.limits.maxFrameBytes, atEnd: atEnd) {
        case .needMore:
            return .needMore
        case .invalid(let error, let consumed):
            return .invalid(error, consumed: max(1, consumed), close: false)
        case .frame(let unescaped, let consumed):
            let result: Result<TrackerMessage, TrackerFrameError> = unescaped.withUnsafeBytes { check($0, now: now) }
            switch result {
            case .success(let message): return .message(message, consumed: consumed)
            case .failure(let error):
                // A bad frame is skipped once the byte after it shows where the next one starts.
                guard let skip = JT808Wire.skipBad(bytes, closingMark: consumed - 1, atEnd: atEnd) else { return .needMore }
                return .invalid(error, consumed: skip, close: false)
            }
        }
    }

    /// Checks an unescaped frame (header … check code) and decodes it.
    private mutating func check(_ frame: UnsafeRawBufferPointer, now: Timestamp) -> Result<TrackerMessage, TrackerFrameError> {
        guard frame.count >= 13, let header = JT808Wire.Header.parse(frame) else {
            return .failure(TrackerFrameError("length", "a frame of \(frame.count) bytes is shorter than its header"))
        }
        let bodyEnd = frame.count - 1
        let check = JT808Wire.bcc(frame[0..<bodyEnd])
        guard check == frame[bodyEnd] else {
            return .failure(TrackerFrameError("checksum", "check code \(WireText.hex([frame[bodyEnd]])) but the frame gives \(WireText.hex([check]))"))
        }
        guard header.size + header.bodyLength == bodyEnd else {
            return .failure(TrackerFrameError("length", "body length \(header.bodyLength) in the attributes, \(bodyEnd - header.size) in the frame"))
        }
        let body = UnsafeRawBufferPointer(rebasing: frame[header.size..<bodyEnd])
        lastHeader = header
        guard header.isSplit, let total = header.total, let index = header.index, total != 1 || index != 1 else {
            var whole = header
            whole.total = nil
            whole.index = nil
            return .success(message(whole, body: body, now: now))
        }
        guard index >= 1, index <= total else {
            return .failure(TrackerFrameError("syntax", "packet \(index) of \(total)"))
        }
        let device = JT808Wire.deviceID(phone: header.phone)
        let allowance = room?(device) ?? .all
        guard allowance != .none else {
            // Not answered: the terminal sends it again once it has authenticated.
            return .success(.control(kind: "split_refused", deviceID: device, answer: nil))
        }
        switch split.add(header, body: body, now: now.milliseconds, room: allowance == .share ? .share : .all) {
        case .complete(let first, let whole):
            return .success(whole.withUnsafeBytes { message(first, body: $0, now: now) })
        case .kept:
            return .success(.control(kind: "split_packet", deviceID: device, answer: nil))
        case .tooLarge:
            return .success(.control(kind: "split_too_large", deviceID: device, answer: generalResponse(header, result: 3)))
        }
    }

    /// The message of a whole (or put back together) body.
    private func message(_ header: JT808Wire.Header, body: UnsafeRawBufferPointer, now: Timestamp) -> TrackerMessage {
        let device = JT808Wire.deviceID(phone: header.phone)
        let kind = Self.kind(header.messageID)
        if header.isEncrypted {
            return .control(kind: "encrypted", deviceID: device, answer: generalResponse(header, result: 3))
        }
        switch header.messageID {
        case 0x0001:
            // The terminal's answer to a command: the command's serial and id, and a result.
            guard body.count >= 5 else { return .control(kind: kind, deviceID: device, answer: nil) }
            return .commandReply(kind: kind, deviceID: device, reply: TrackerCommandReply(reference: Array(body[0..<4]), code: Int(body[4])),
                                 answer: nil)
        case 0x0100:
            return .admission(TrackerAdmission(kind: kind, deviceID: device, request: .register(terminal: Self.terminal(body, header)),
                                               reply: header.bytes))
        case 0x0102:
            return .admission(TrackerAdmission(kind: kind, deviceID: device, request: .authenticate(code: Self.code(body, header)),
                                               reply: header.bytes))
        case 0x0003:
            return .admission(TrackerAdmission(kind: kind, deviceID: device, request: .deregister, reply: header.bytes))
        case 0x0200:
            return locations(location.position(body, is2019: header.is2019).map { [$0] } ?? [], header, device, kind)
        case 0x0201:
            guard body.count > 2 else { return undecoded(header, device) }
            let position = location.position(UnsafeRawBufferPointer(rebasing: body[2...]), is2019: header.is2019)
            var message = locations(position.map { [$0] } ?? [], header, device, kind)
            // It answers the position query (0x8201) whose serial it names.
            if case .records(var records) = message {
                records.reply = TrackerCommandReply(reference: Array(body[0..<2]) + [0x82, 0x01], text: "position reported")
                message = .records(records)
            }
            return message
        case 0x0704:
            return batch(body, header, device, kind)
        case 0x0210:
            return vendorBatch(body, header, device, kind)
        case 0x0801:
            return .control(kind: kind, deviceID: device, answer: mediaResponse(header, body))
        default:
            return .control(kind: kind, deviceID: device, answer: generalResponse(header, result: 0))
        }
    }

    /// Records of decoded locations, answered once handled; `undecoded` when none is a
    /// location. `missing` items held no location (off the Earth, cut short): they are counted
    /// (``TrackerRecords/undecoded``) and the good ones kept, since the terminal deletes the
    /// whole message once it is answered.
    private func locations(_ positions: [Position], missing: Int = 0, _ header: JT808Wire.Header, _ device: String,
                           _ kind: String) -> TrackerMessage {
        guard !positions.isEmpty else { return undecoded(header, device) }
        return .records(TrackerRecords(deviceID: device, positions: positions, answer: generalResponse(header, result: 0), kind: kind,
                                       undecoded: missing))
    }

    /// A message that says it holds locations but does not: answered (the terminal would send it
    /// for ever) and counted, with nothing to keep.
    private func undecoded(_ header: JT808Wire.Header, _ device: String) -> TrackerMessage {
        .control(kind: "undecoded", deviceID: device, answer: generalResponse(header, result: 0))
    }

    /// 0x0704: count WORD | type BYTE (0 normal, 1 stored while out of coverage) | count × (length WORD | location).
    /// Items that are no location, and those the count announces but a body cut short does not
    /// hold, are counted.
    private func batch(_ body: UnsafeRawBufferPointer, _ header: JT808Wire.Header, _ device: String, _ kind: String) -> TrackerMessage {
        var reader = ByteReader(body)
        guard let count = reader.u16(), let type = reader.u8(), count > 0 else { return undecoded(header, device) }
        var positions: [Position] = []
        for _ in 0..<count {
            guard let length = reader.u16(), let item = reader.take(Int(length)) else { break }
            guard var position = location.position(UnsafeRawBufferPointer(rebasing: item), is2019: header.is2019) else { continue }
            if type == 1 { LateFixes.mark(&position) }
            positions.append(position)
        }
        return locations(positions, missing: Int(count) - positions.count, header, device, kind)
    }

    /// Vendor 0x0210 (Traccar's "location batch"): locations each after a length BYTE, to the
    /// end of the body. Another layout (7 bytes of battery and time, no location) is a control;
    /// past a first location, an item that is none, or runs past the body, is counted.
    private func vendorBatch(_ body: UnsafeRawBufferPointer, _ header: JT808Wire.Header, _ device: String, _ kind: String) -> TrackerMessage {
        var reader = ByteReader(body)
        var positions: [Position] = []
        var items = 0
        while !reader.isAtEnd {
            guard let length = reader.u8(), length >= JT808Location.basicSize, let item = reader.take(Int(length)) else {
                if items == 0 { return .control(kind: kind, deviceID: device, answer: generalResponse(header, result: 0)) }
                items += 1
                break
            }
            items += 1
            if let position = location.position(UnsafeRawBufferPointer(rebasing: item), is2019: header.is2019) { positions.append(position) }
        }
        return locations(positions, missing: items - positions.count, header, device, kind)
    }

    /// `0x0200` for metric labels.
    static func kind(_ messageID: UInt16) -> String {
        "0x" + WireText.hex([UInt8(messageID >> 8), UInt8(messageID & 0xFF)])
    }

    /// What a registration says the terminal is: maker, model and terminal id as printable text
    /// (2013: 5 + 20 + 7 bytes after province and city; 2019: 11 + 30 + 30; 2011: 5 + 8 + 7).
    static func terminal(_ body: UnsafeRawBufferPointer, _ header: JT808Wire.Header) -> String {
        let widths = header.is2019 ? [11, 30, 30] : body.count >= 37 ? [5, 20, 7] : [5, 8, 7]
        var reader = ByteReader(body, from: 4)
        var parts: [String] = []
        for width in widths {
            guard let field = reader.take(width) else { break }
            parts.append(printable(field))
        }
        return parts.joined(separator: "/")
    }

    /// The code of an authentication: 2013 the whole body; 2019 a length BYTE, then the code
    /// (then the IMEI and the software version, not used). Trailing NULs and spaces are dropped.
    static func code(_ body: UnsafeRawBufferPointer, _ header: JT808Wire.Header) -> String {
        if header.is2019, let length = body.first, Int(length) < body.count {
            return printable(body[1..<(1 + Int(length))])
        }
        return printable(body[...])
    }

    /// Printable ASCII of a fixed-width field, without the NUL or space padding at its end.
    static func printable(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        var kept = Array(bytes)
        while let last = kept.last, last == 0 || last == 0x20 { kept.removeLast() }
        return String(decoding: kept.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    // MARK: - Answers

    /// 0x8001: reply serial | reply id | result (0 success, 1 failure, 2 message error, 3 not supported).
    func generalResponse(_ header: JT808Wire.Header, result: UInt8) -> [UInt8] {
        var out = header.answerHeader(messageID: 0x8001, bodyLength: 5)
        JT808Wire.append(header.serial, to: &out)
        JT808Wire.append(header.messageID, to: &out)
        out.append(result)
        return out
    }

    /// 0x8800 for a whole multimedia upload: its media id and no packet to send again.
    private func mediaResponse(_ header: JT808Wire.Header, _ body: UnsafeRawBufferPointer) -> [UInt8] {
        guard body.count >= 4 else { return generalResponse(header, result: 2) }
        var out = header.answerHeader(messageID: 0x8800, bodyLength: 5)
        out += body[0..<4]
        out.append(0)
        return out
    }

    public func answer(_ admission: TrackerAdmission, _ verdict: TrackerAdmissionVerdict) -> [UInt8]? {
        guard let header = admission.reply.withUnsafeBytes({ JT808Wire.Header.parse($0) }) else { return nil }
        switch (admission.request, verdict) {
        case (.register, .registered(let code)):
            let text = Array(code.utf8)
            var out = header.answerHeader(messageID: 0x8100, bodyLength: 3 + text.count)
            JT808Wire.append(header.serial, to: &out)
            out.append(0)
            out += text
            return out
        case (.register, .refused(let why)):
            // 0x8100 results: 3 terminal already registered, 4 no such terminal.
            guard why != .unavailable else { return nil }
            var out = header.answerHeader(messageID: 0x8100, bodyLength: 3)
            JT808Wire.append(header.serial, to: &out)
            out.append(why == .alreadyRegistered ? 3 : 4)
            return out
        case (_, .refused(.unavailable)):
            return nil
        case (_, .refused):
            return generalResponse(header, result: 1)
        default:
            return generalResponse(header, result: 0)
        }
    }

    public mutating func outgoing(_ answer: [UInt8]) -> [UInt8] {
        // A frame given whole (a `custom` command's `hex`) goes as it is.
        if answer.first == JT808Wire.mark { return answer }
        guard let offset = JT808Wire.serialOffset(answer) else { return answer }
        var numbered = answer
        let phone = Array(answer[(offset - (offset == 15 ? 10 : 6))..<offset])
        if serials.count >= Self.maxSerialTerminals && serials[phone] == nil { serials.removeAll() }
        let serial = serials[phone, default: 0]
        serials[phone] = serial &+ 1
        numbered[offset] = UInt8(serial >> 8)
        numbered[offset + 1] = UInt8(serial & 0xFF)
        return JT808Wire.frame(numbered)
    }

    // MARK: - Idle

    /// Asks for the missing packets of split messages quiet for a second (``JT808Split`` says
    /// when, and how often), drops those past `split_timeout`, and asks to be called again while
    /// any is kept.
    public mutating func idle(now: Timestamp, ending: Bool) -> TrackerIdleOutput {
        var answers: [[UInt8]] = []
        if ending {
            split.dropAll()
        } else if options.splitRequests > 0 {
            for (header, missing) in split.requests(now: now.milliseconds, quietSince: now.milliseconds - 1_000) {
                answers.append(Self.resendRequest(header, missing: missing))
            }
        } else {
            split.expire(now: now.milliseconds)
        }
        return TrackerIdleOutput(answers: answers, counts: split.takeCounts(), callAgain: !split.isEmpty)
    }

    /// 0x8003: the message's serial | count (BYTE, WORD in 2019) | the missing packets' indexes (WORDs).
    static func resendRequest(_ header: JT808Wire.Header, missing: [UInt16]) -> [UInt8] {
        // The body length field has 10 bits: at most 509 indexes fit beside the serial and count.
        let listed = Array(missing.prefix(header.is2019 ? 509 : 0xFF))
        let countWidth = header.is2019 ? 2 : 1
        var out = header.answerHeader(messageID: 0x8003, bodyLength: 2 + countWidth + 2 * listed.count)
        JT808Wire.append(header.serial, to: &out)
        if header.is2019 { JT808Wire.append(UInt16(listed.count), to: &out) } else { out.append(UInt8(listed.count)) }
        for index in listed { JT808Wire.append(index, to: &out) }
        return out
    }

    /// The phone digits as sent, leading zeros kept (the BCD field), or the IMEI derived from a
    /// binary field: the authentication code Traccar issues, for `auth: "phone"`.
    public static func phoneCode(_ admission: TrackerAdmission) -> String? {
        guard let header = admission.reply.withUnsafeBytes({ JT808Wire.Header.parse($0) }) else { return nil }
        return WireText.bcdDigits(header.phone) ?? JT808Wire.deviceID(phone: header.phone)
    }
}
