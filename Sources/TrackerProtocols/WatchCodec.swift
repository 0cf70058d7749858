import GatewayCore

/// The protocol of children's and elderly people's watches (the "3G" protocol of Wonlex,
/// SeTracker and their many makers): `[maker*id*length*content]`, or with a message index
/// `[maker*id*index*length*content]`, length and index in four hex digits.
///
///     [3G*9031853319*004E*UD2,220322,055105,A,22.761162,N,114.360192,E,0,0,47,14,100,64,0,0,00000008,0,0]
///                          type date   time   fix lat       N/S lon        E/W km/h course alt sats rssi battery steps …
///
/// A frame ends at the `]` that balances its first `[` (Wi-Fi names hold brackets). The length
/// field is often wrong (devices count characters, bytes or nothing): it is not checked, the
/// brackets decide. Binary content (voice, photos) is escaped: `}01` `}` … `}05` `*`; a `}`
/// followed by anything else is a bad frame. Bytes before a `[` are skipped.
///
/// - `UD`, `UD2`, `UD3`, `UD_LTE`, `UD_WCDMA`… (every type starting `UD`), `WT` and every alarm
///   type (`AL`, `AL_LTE`, `ALCUSTOMER1`…) → `.records` with one position: date `ddMMyy` and time
///   `HHmmss` (UTC), `A` a fix (`V` keeps the coordinates with mode `.noFix`, unless both are
///   zero), signed decimal degrees (negative also when the hemisphere is S or W), speed km/h,
///   course, altitude (m), satellites; `rssi`, `battery_level` (%), `steps`, `status` (hex) as
///   attributes; an alarm type adds `alarm` (its type word).
/// - Alarms are answered `[maker*id*[index*]0002*AL]` once their position was handled end to end
///   (at once when the frame holds none); `LK` (the link) `…*0002*LK]`, `INIT` `INIT,1`, `TKQ` and
///   `TKQ2` the same word, `JXTK` `JXTKR,1` — at once. The echo of a command's word (one this
///   codec sent: ``encode(_:now:)``) → `.commandReply`. Everything else (heart rate, pulse,
///   temperature, blood pressure, voice, photos) → `.control` without an answer.
///   Positions (`UD…`, `WT`) are never answered: the protocol has no answer for them.
public struct WatchCodec: TrackerCodec {
    public let limits: TrackerLimits
    /// The maker and id of the device's last frame, and whether it numbers its frames: commands
    /// go in the same form.
    private(set) var lastHeader: (maker: String, id: String, indexed: Bool)?
    /// The command words sent and not yet echoed, oldest first (a frame of one is the device's echo).
    var sentWords: [String] = []

    public init(limits: TrackerLimits) { self.limits = limits }

    static let open = UInt8(ascii: "["), close = UInt8(ascii: "]"), star = UInt8(ascii: "*"), escape = UInt8(ascii: "}")

    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        guard let first = bytes.first else { return .needMore }
        guard first == Self.open else {
            return TextFraming.skip(bytes, from: 1, TrackerFrameError("syntax", "bytes before a frame")) { $0 == Self.open }
        }
        var depth = 0
        var end: Int?
        let limit = min(bytes.count, limits.maxFrameBytes)
        for index in 0..<limit {
            if bytes[index] == Self.open { depth += 1 } else if bytes[index] == Self.close { depth -= 1 }
            if depth == 0 {
                end = index
                break
            }
        }
        guard let end else {
            if bytes.count >= limits.maxFrameBytes {
                return TextFraming.skip(bytes, from: 1, TrackerFrameError("too_large", "no closing ] within \(limits.maxFrameBytes) bytes")) { $0 == Self.open }
            }
            return .needMore
        }
        guard let content = Self.unescape(UnsafeRawBufferPointer(rebasing: bytes[1..<end])) else {
            return .invalid(TrackerFrameError("syntax", "an escape other than }01…}05"), consumed: end + 1, close: false)
        }
        let result = content.withUnsafeBytes { frame($0) }
        switch result {
        case .success(let message): return .message(message, consumed: end + 1)
        case .failure(let error): return .invalid(error, consumed: end + 1, close: false)
        }
    }

    /// The frame's bytes with `}01`…`}05` put back; nil for a bad escape.
    static func unescape(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == escape {
                guard index + 1 < bytes.count else { return nil }
                switch bytes[index + 1] {
                case 1: out.append(escape)
                case 2: out.append(open)
                case 3: out.append(close)
                case 4: out.append(UInt8(ascii: ","))
                case 5: out.append(star)
                default: return nil
                }
                index += 2
            } else {
                out.append(byte)
                index += 1
            }
        }
        return out
    }

    /// The header and content between the brackets.
    mutating func frame(_ text: UnsafeRawBufferPointer) -> Result<TrackerMessage, TrackerFrameError> {
        let header = TextFields(text, separator: Self.star, limit: 5)
        guard header.count >= 4, let maker = TextNumber.printable(header[0], limit: 4), !maker.isEmpty,
              let id = TextNumber.printable(header[1], limit: 24), !id.isEmpty, !id.contains(" ")
        else { return .failure(TrackerFrameError("syntax", "header fields")) }
        // `index*length*content` when the two fields after the id are both 4 hex digits.
        let indexed = header.count == 5 && Self.isFourHex(header[2]) && Self.isFourHex(header[3])
        guard Self.isFourHex(header[indexed ? 3 : 2]) else { return .failure(TrackerFrameError("syntax", "length field")) }
        let index = indexed ? String(decoding: header[2], as: UTF8.self) : nil
        let contentStart = header.ranges[indexed ? 4 : 3].lowerBound
        let content = TextFields(text, separator: UInt8(ascii: ","), from: contentStart)
        let type = TextNumber.printable(content[0], limit: 32) ?? ""
        lastHeader = (maker, id, indexed)
        func answer(_ word: String) -> [UInt8] {
            let length = String(word.utf8.count, radix: 16)
            return TextFraming.ascii("[\(maker)*\(id)*\(index.map { "\($0)*" } ?? "")\(String(repeating: "0", count: max(0, 4 - length.count)) + length)*\(word)]")
        }
        let alarm = type.hasPrefix("AL")
        if alarm || type.hasPrefix("UD") || type == "WT" {
            guard let position = Self.position(content) else {
                return .success(.control(kind: "no_position", deviceID: id, answer: alarm ? answer("AL") : nil))
            }
            var fix = position
            if alarm { fix.attributes["alarm"] = type }
            return .success(.records(TrackerRecords(deviceID: id, positions: [fix], answer: alarm ? answer("AL") : nil, kind: alarm ? "alarm" : nil)))
        }
        if let sent = sentWords.firstIndex(of: type) {
            // The device echoes a command's word when it takes the command.
            sentWords.remove(at: sent)
            let text = String(decoding: text[contentStart...], as: UTF8.self)
            return .success(.commandReply(kind: "command_reply", deviceID: id, reply: TrackerCommandReply(reference: Array(type.utf8), text: text),
                                          answer: nil))
        }
        switch type {
        case "LK": return .success(.control(kind: "link", deviceID: id, answer: answer("LK")))
        case "INIT": return .success(.control(kind: "init", deviceID: id, answer: answer("INIT,1")))
        case "TKQ", "TKQ2": return .success(.control(kind: "voice_request", deviceID: id, answer: answer(type)))
        case "JXTK": return .success(.control(kind: "voice", deviceID: id, answer: answer("JXTKR,1")))
        default:
            let known = ["heart", "PULSE", "oxygen", "TEMP", "btemp2", "bphrt", "TK", "img", "rcapture"]
            return .success(.control(kind: known.contains(type) ? type.lowercased() : "other", deviceID: id, answer: nil))
        }
    }

    static func isFourHex(_ field: Slice<UnsafeRawBufferPointer>) -> Bool {
        field.count == 4 && TextNumber.hex(field) != nil
    }

    /// `date, time, A|V, lat, N|S, lon, E|W, km/h, course, altitude, satellites, rssi, battery, steps, tumbles, status, …`.
    static func position(_ fields: TextFields) -> Position? {
        guard fields.count >= 8, let latitude = fields.decimal(4), let longitude = fields.decimal(6) else { return nil }
        let valid = fields.is(3, "A")
        guard valid || fields.is(3, "V") else { return nil }
        // The number's own sign, or the hemisphere's.
        let lat = fields.is(5, "S") ? -abs(latitude) : latitude
        let lon = fields.is(7, "W") ? -abs(longitude) : longitude
        guard var position = TextFix.position(
            time: TextTime.instant(date: fields[1], "ddMMyy", time: fields[2], "HHmmss"), latitude: lat, longitude: lon,
            valid: valid, altitude: fields.decimal(10), speedKmh: fields.decimal(8), course: fields.decimal(9),
            satellites: fields.integer(11))
        else { return nil }
        if let rssi = fields.integer(12) { position.attributes["rssi"] = String(rssi) }
        if let battery = fields.integer(13) { position.attributes["battery_level"] = String(battery) }
        if let steps = fields.integer(14) { position.attributes["steps"] = String(steps) }
        if fields.hex(16) != nil, fields[16].count <= 8 {
            position.attributes["status"] = String(decoding: fields[16], as: UTF8.self).lowercased()
        }
        return position
    }
}
