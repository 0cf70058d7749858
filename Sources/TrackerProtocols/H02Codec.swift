import GatewayCore

/// The H02 protocol (Sinotrack ST-901 / ST-906 and the many "HQ" trackers): ASCII sentences
/// between `*` and `#`, and 32/45/48-byte binary reports starting with `$`. There is no login
/// and no checksum: every frame names its device, and fields are checked instead.
///
/// Text: `*<maker>,<id>,<command>,...#` (maker usually `HQ`), followed by optional CR/LF.
///
///     *HQ,4210051415,V1,164549,A,0956.3869,N,08406.7068,W,000.00,000,221215,FFFFFBFF,...#
///                       time   valid lat       N/S lon        E/W knots  course date status
///
/// - Position sentences: every `V…` command other than V0 and V3 (V1, V2, V6, V8, V19, VI1, ...),
///   `V4` replies that end in a position, and `VP1,A,...` (no time of day) → `.records` with
///   `deviceID`. Latitude and longitude come as `DDMM.MMMM`, `-DD-MM.MMMM` or `DDMMMMMM`; a
///   battery field may stand between course and date. Validity `A` (or a coding-scheme digit)
///   is a fix (`.twoD`); `V` keeps the coordinates with mode `.noFix`. A position without both a
///   date and a time of day has no time (``Position/time`` nil): the frame does not say when it was.
///   An invalid (`V`) sentence without readable coordinates is `.control("no_fix")`.
/// - `HTBT`, `V0`, `LINK` → `.control("heartbeat")`; `NBR`, `V3`, `VP1,V,...` → `.control("lbs")`;
///   `SMS` → `.control("sms")`; a `V4` reply without a position → `.control("command_response")`;
///   anything else → `.control("other")`.
///
/// Answers (UTC `now`): V1 → `*HQ,<id>,V4,V1,<yyyyMMddHHmmss>#` always (what devices wait for);
/// other positions (VP1 excepted) → `*HQ,<id>,R12,<HHmmss>#` when ``acknowledgePositions``, else none;
/// HTBT and V0 → the sentence's first three fields echoed, `*HQ,<id>,HTBT#`; NBR →
/// `*HQ,<id>,V4,NBR,<yyyyMMddHHmmss>#`; nothing else is answered.
///
/// Binary (`$`): id (5 bytes BCD), time `hhmmss`, date `DDMMYY`, latitude `DDMMmmmm` (BCD),
/// a battery byte, longitude `DDDMMmmmm` plus a flags nibble (bit 1 valid, bit 2 north,
/// bit 3 east), speed (3 BCD digits, knots) and course (3 BCD digits), 4 status bytes, then
/// 3 bytes (32-byte reports) or cell data (45 and 48 bytes). The length is not in the frame: it
/// is learned from the first report of a connection by where the next frame starts (a `*`, `$`,
/// CR or LF right after 32, 45 or 48 bytes), so that first report is decoded when the next
/// frame's first byte has arrived; every later report is taken at the learned length.
/// The 8-byte-id variant (42 bytes) is not supported: it cannot be told from a 45-byte report.
///
/// Speeds are knots (× 1852 / 3600 → m/s). A text frame without `#` within
/// ``TrackerLimits/maxFrameBytes`` is `.invalid(too_large)`; a malformed field is
/// `.invalid(syntax)`; garbage is skipped up to the next `*` or `$`. Never `close: true`.
public struct H02Codec: TrackerCodec {
    /// Bounds on frame sizes.
    public let limits: TrackerLimits
    /// Whether positions other than V1 are answered with `R12` (the device's `h02.ack` setting).
    public let acknowledgePositions: Bool
    /// The length of this connection's binary reports, once the first one showed it.
    private var binaryLength: Int?
    /// The id the device last gave: commands name it.
    private(set) var lastDeviceID: String?

    /// A codec for one connection.
    public init(limits: TrackerLimits, acknowledgePositions: Bool) {
        self.limits = limits
        self.acknowledgePositions = acknowledgePositions
    }

    static let star = UInt8(ascii: "*"), dollar = UInt8(ascii: "$"), hash = UInt8(ascii: "#")
    static let cr: UInt8 = 0x0D, lf: UInt8 = 0x0A
    static let binaryLengths = [32, 45, 48]

    /// Decodes the frame at the start of `bytes`; see the type's documentation.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        let result = decodeFrame(bytes, now: now)
        if case .message(let message, _) = result, let id = message.namedDevice { lastDeviceID = id }
        return result
    }

    private mutating func decodeFrame(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        // Line breaks after `#` are part of no frame: they are taken with the frame that follows,
        // so that it does not matter whether they arrive with the previous frame or the next.
        var start = 0
        while start < bytes.count, bytes[start] == Self.cr || bytes[start] == Self.lf { start += 1 }
        guard start < bytes.count else {
            return start > 2
                ? .invalid(TrackerFrameError("syntax", "line breaks without a frame"), consumed: start, close: false)
                : .needMore
        }
        switch bytes[start] {
        case Self.star: return decodeText(bytes, start: start, now: now)
        case Self.dollar: return decodeBinary(bytes, start: start, now: now)
        default: return Self.skipToMarker(bytes, from: start + 1, TrackerFrameError("syntax", "bytes before a frame"))
        }
    }

    /// Skips to the next `*` or `$` at or after `index`.
    static func skipToMarker(_ bytes: UnsafeRawBufferPointer, from index: Int, _ error: TrackerFrameError) -> TrackerDecodeResult {
        var next = index
        while next < bytes.count, bytes[next] != star, bytes[next] != dollar { next += 1 }
        return .invalid(error, consumed: max(1, next), close: false)
    }

    // MARK: - Text frames

    private func decodeText(_ bytes: UnsafeRawBufferPointer, start: Int, now: Timestamp) -> TrackerDecodeResult {
        let limit = start + min(bytes.count - start, max(0, limits.maxFrameBytes))
        var index = start + 1
        while index < limit {
            switch bytes[index] {
            case Self.hash:
                let consumed = index + 1
                switch decodeSentence(bytes[(start + 1)..<index], now: now) {
                case .success(let message): return .message(message, consumed: consumed)
                case .failure(let error): return .invalid(error, consumed: consumed, close: false)
                }
            case Self.star:
                return .invalid(TrackerFrameError("syntax", "sentence cut short by the next one"), consumed: index, close: false)
            default:
                index += 1
            }
        }
        if bytes.count - start >= limits.maxFrameBytes {
            return Self.skipToMarker(bytes, from: start + 1,
                                     TrackerFrameError("too_large", "no # within \(limits.maxFrameBytes) bytes"))
        }
        return .needMore
    }

    /// The sentence between `*` and `#`.
    func decodeSentence(_ body: Slice<UnsafeRawBufferPointer>, now: Timestamp) -> Result<TrackerMessage, TrackerFrameError> {
        // ASCII text only (line breaks allowed: SMS replies span lines).
        guard body.allSatisfy({ ($0 >= 0x20 && $0 < 0x7F) || $0 == Self.cr || $0 == Self.lf || $0 == 0x09 }) else {
            return .failure(TrackerFrameError("syntax", "non-ASCII byte in a sentence"))
        }
        let text = String(decoding: body, as: UTF8.self)
        let fields = text.split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count >= 3 else { return .failure(TrackerFrameError("syntax", "fewer than 3 fields")) }
        let maker = fields[0], id = fields[1], command = fields[2]
        guard maker.count == 2, maker.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return .failure(TrackerFrameError("syntax", "maker field"))
        }
        guard !id.isEmpty, id.count <= 20, id.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return .failure(TrackerFrameError("syntax", "device id field"))
        }
        guard !command.isEmpty, command.count <= 8, command.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return .failure(TrackerFrameError("syntax", "command field"))
        }
        let deviceID = String(id)
        let cmd = command.uppercased()

        switch cmd {
        case "HTBT", "V0":
            let echo = Array("*\(maker),\(id),\(command)#".utf8)
            return .success(.control(kind: "heartbeat", deviceID: deviceID, answer: echo))
        case "LINK":
            return .success(.control(kind: "heartbeat", deviceID: deviceID, answer: nil))
        case "NBR":
            return .success(.control(kind: "lbs", deviceID: deviceID,
                                     answer: Self.answer(id: deviceID, "V4,NBR,\(Self.dateTime(now))")))
        case "V3":
            return .success(.control(kind: "lbs", deviceID: deviceID, answer: nil))
        case "SMS":
            return .success(.control(kind: "sms", deviceID: deviceID, answer: nil))
        case "VP1":
            guard fields.count > 3, fields[3] == "A" || fields[3] == "B" else {
                return .success(.control(kind: "lbs", deviceID: deviceID, answer: nil))
            }
            // VP1,A,lat,N,lon,E,speed,course,date: a fix without a time of day.
            return positionSentence(fields, validityIndex: 3, hasTime: false, deviceID: deviceID, command: cmd, now: now)
        case "V4":
            // A reply to a command (`V4,<command>,<result fields>,…,<command time>,<position…>`),
            // often followed by a position.
            var index = 4
            while index + 4 < fields.count {
                if ["A", "V", "B"].contains(fields[index]), ["N", "S"].contains(fields[index + 2]),
                    ["E", "W"].contains(fields[index + 4])
                {
                    let reply = Self.reply(fields, end: index - 2)
                    return positionSentence(fields, validityIndex: index, hasTime: true, deviceID: deviceID, command: cmd, now: now).map { message in
                        guard case .records(var records) = message else { return message }
                        records.reply = reply
                        return .records(records)
                    }
                }
                index += 1
            }
            return .success(.commandReply(kind: "command_response", deviceID: deviceID, reply: Self.reply(fields, end: fields.count), answer: nil))
        default:
            if cmd.hasPrefix("V") {
                return positionSentence(fields, validityIndex: 4, hasTime: true, deviceID: deviceID, command: cmd, now: now)
            }
            return .success(.control(kind: "other", deviceID: deviceID, answer: nil))
        }
    }

    /// `[time,] validity, lat, N/S, lon, E/W, speed, course, [battery,] date, [status, …]`.
    private func positionSentence(_ fields: [Substring], validityIndex v: Int, hasTime: Bool, deviceID: String,
                                  command: String, now: Timestamp) -> Result<TrackerMessage, TrackerFrameError> {
        guard fields.count > v + 4 else { return .failure(TrackerFrameError("syntax", "position fields missing")) }
        let validity = fields[v].trimmingSpaces
        let valid: Bool
        switch validity {
        case "A", "B": valid = true
        case "V": valid = false
        default:
            // A digit is a coding scheme in place of the validity, sent with a fix.
            guard validity.count == 1, validity.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                return .failure(TrackerFrameError("syntax", "validity field"))
            }
            valid = true
        }
        func notAFix(_ detail: String) -> Result<TrackerMessage, TrackerFrameError> {
            // A device without a fix sends empty or zero fields: no position, and not a bad frame.
            valid ? .failure(TrackerFrameError("syntax", detail)) : .success(.control(kind: "no_fix", deviceID: deviceID, answer: nil))
        }
        guard let latitude = Self.coordinate(fields[v + 1], hemisphere: fields[v + 2], positive: "N", negative: "S", max: 90),
            let longitude = Self.coordinate(fields[v + 3], hemisphere: fields[v + 4], positive: "E", negative: "W", max: 180)
        else { return notAFix("coordinate fields") }

        var speedKnots: Double?
        var course: Double?
        if fields.count > v + 5 {
            guard let speed = Self.number(fields[v + 5]) else { return notAFix("speed field") }
            speedKnots = speed
        }
        if fields.count > v + 6, !fields[v + 6].trimmingSpaces.isEmpty {
            guard let value = Self.number(fields[v + 6]), value <= 360 else { return notAFix("course field") }
            course = value
        }
        // The date, or a battery field then the date.
        var dateIndex = v + 7
        if fields.count > dateIndex + 1, Self.date(fields[dateIndex]) == nil, (1...3).contains(fields[dateIndex].count),
            fields[dateIndex].allSatisfy({ $0.isASCII && $0.isNumber }), Self.date(fields[dateIndex + 1]) != nil
        {
            dateIndex += 1
        }
        // A time needs both the date and the time of day; either alone says nothing about when.
        let dateField = fields.count > dateIndex ? fields[dateIndex] : ""
        let timeField = hasTime ? fields[v - 1] : ""
        let day = Self.date(dateField), seconds = Self.timeOfDay(timeField)
        if (!dateField.isEmpty && day == nil) || (!timeField.isEmpty && seconds == nil) {
            return notAFix("date or time field")
        }
        var time: Timestamp?
        if let day, let seconds {
            time = Timestamp(milliseconds: (Int64(day) * 86_400 + Int64(seconds)) * 1000)
        }

        var position = Position(
            time: time, latitude: latitude, longitude: longitude,
            speed: speedKnots.map { $0 * 1852 / 3600 }, course: course, mode: valid ? .twoD : .noFix)
        if fields.count > dateIndex + 1 {
            let status = fields[dateIndex + 1]
            if status.count == 8, status.allSatisfy({ $0.isHexDigit }) {
                position.attributes["status"] = status.lowercased()
            }
        }
        let answer: [UInt8]?
        switch command {
        case "V1": answer = Self.answer(id: deviceID, "V4,V1,\(Self.dateTime(now))")
        case "VP1": answer = nil  // a phone-style report: no acknowledgement is defined for it
        default: answer = acknowledgePositions ? Self.answer(id: deviceID, "R12,\(Self.timeOnly(now))") : nil
        }
        return .success(.records(TrackerRecords(deviceID: deviceID, positions: [position], answer: answer)))
    }

    // MARK: - Binary frames

    private mutating func decodeBinary(_ bytes: UnsafeRawBufferPointer, start: Int, now: Timestamp) -> TrackerDecodeResult {
        let available = bytes.count - start
        let length: Int
        if let known = binaryLength {
            length = known
        } else {
            // The first report of the connection: its length is where the next frame begins.
            var found: Int?
            for candidate in Self.binaryLengths {
                guard available > candidate else { return .needMore }
                let next = bytes[start + candidate]
                if next == Self.star || next == Self.dollar || next == Self.cr || next == Self.lf {
                    found = candidate
                    break
                }
            }
            guard let found else {
                return Self.skipToMarker(bytes, from: start + 1, TrackerFrameError("syntax", "binary report of no known length"))
            }
            length = found
        }
        if length > limits.maxFrameBytes {
            return Self.skipToMarker(bytes, from: start + 1, TrackerFrameError("too_large", "binary report of \(length) bytes"))
        }
        guard available >= length else { return .needMore }
        let frame = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + length)])
        guard let (deviceID, position) = Self.readBinary(frame) else {
            // A `$` inside other bytes is no frame: resynchronise right after it.
            return Self.skipToMarker(bytes, from: start + 1, TrackerFrameError("syntax", "binary report fields"))
        }
        binaryLength = length
        let answer = acknowledgePositions ? Self.answer(id: deviceID, "R12,\(Self.timeOnly(now))") : nil
        return .message(.records(TrackerRecords(deviceID: deviceID, positions: [position], answer: answer)),
                        consumed: start + length)
    }

    /// The fields every binary report starts with (its first 29 bytes), or nil when a BCD digit,
    /// the time, the date or a coordinate is out of range.
    static func readBinary(_ frame: UnsafeRawBufferPointer) -> (deviceID: String, position: Position)? {
        guard frame.count >= 29, frame[0] == dollar,
            let id = WireText.bcdDigits(frame[1..<6]), let clock = WireText.bcdDigits(frame[6..<9]),
            let date = WireText.bcdDigits(frame[9..<12]), let lat = WireText.bcdDigits(frame[12..<16]),
            let lonHead = WireText.bcdDigits(frame[17..<21]), frame[21] >> 4 <= 9,
            let motion = WireText.bcdDigits(frame[22..<25])
        else { return nil }
        // The longitude's ninth digit shares its byte with the flags.
        let lon = Array((lonHead + String(frame[21] >> 4)).utf8)
        let flags = frame[21] & 0x0F
        let clockDigits = Array(clock.utf8), dateDigits = Array(date.utf8), latDigits = Array(lat.utf8)
        let motionDigits = Array(motion.utf8)
        guard let hour = digits(clockDigits, 0, 2), let minute = digits(clockDigits, 2, 2),
            let second = digits(clockDigits, 4, 2), let day = digits(dateDigits, 0, 2),
            let month = digits(dateDigits, 2, 2), let year = digits(dateDigits, 4, 2),
            let time = CivilTime(year: 2000 + year, month: month, day: day, hour: hour, minute: minute, second: second).timestamp,
            let latDegrees = digits(latDigits, 0, 2), let latMinutes = digits(latDigits, 2, 2),
            let latFraction = digits(latDigits, 4, 4), let lonDegrees = digits(lon, 0, 3),
            let lonMinutes = digits(lon, 3, 2), let lonFraction = digits(lon, 5, 4),
            let speed = digits(motionDigits, 0, 3), let course = digits(motionDigits, 3, 3),
            latMinutes < 60, lonMinutes < 60, course <= 360
        else { return nil }
        var latitude = Double(latDegrees) + (Double(latMinutes) + Double(latFraction) / 10_000) / 60
        var longitude = Double(lonDegrees) + (Double(lonMinutes) + Double(lonFraction) / 10_000) / 60
        guard latitude <= 90, longitude <= 180 else { return nil }
        if flags & 0x04 == 0 { latitude = -latitude }
        if flags & 0x08 == 0 { longitude = -longitude }
        var position = Position(
            time: time, latitude: latitude, longitude: longitude, speed: Double(speed) * 1852 / 3600,
            course: Double(course), mode: flags & 0x02 != 0 ? .twoD : .noFix)
        position.attributes["status"] = WireText.hex(frame[25..<29])
        position.attributes["battery"] = String(frame[16])
        return (id, position)
    }

    /// Value of the ASCII digits `text[offset..<offset+count]`.
    static func digits(_ text: [UInt8], _ offset: Int, _ count: Int) -> Int? {
        guard offset >= 0, count > 0, offset + count <= text.count else { return nil }
        var value = 0
        for byte in text[offset..<(offset + count)] {
            guard byte >= 48, byte <= 57 else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        return value
    }

    // MARK: - Fields

    /// `DDMM.MMMM`, `-DD-MM.MMMM` or `DDMMMMMM` with a hemisphere letter, in signed degrees.
    static func coordinate(_ field: Substring, hemisphere: Substring, positive: Character, negative: Character,
                           max maxDegrees: Double) -> Double? {
        let h = hemisphere.trimmingSpaces
        guard h.count == 1, let letter = h.first, letter == positive || letter == negative else { return nil }
        let text = field.trimmingSpaces
        guard !text.isEmpty, text.count <= 16 else { return nil }
        var degrees: Double
        var minutes: Double
        if text.hasPrefix("-") {
            let parts = text.dropFirst().split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, let d = number(parts[0]), parts[0].allSatisfy({ $0.isNumber }), let m = number(parts[1]) else {
                return nil
            }
            degrees = d
            minutes = m
        } else if let dot = text.firstIndex(of: ".") {
            let whole = text[..<dot]
            guard whole.allSatisfy({ $0.isASCII && $0.isNumber }), number(text) != nil else { return nil }
            let degreeDigits = whole.dropLast(2)
            degrees = degreeDigits.isEmpty ? 0 : Double(String(degreeDigits)) ?? .nan
            minutes = number(text[whole.index(whole.endIndex, offsetBy: -min(2, whole.count))...]) ?? .nan
        } else {
            guard text.count >= 7, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            let fraction = text.suffix(4), wholeMinutes = text.dropLast(4).suffix(2), degreeDigits = text.dropLast(6)
            degrees = degreeDigits.isEmpty ? 0 : Double(String(degreeDigits)) ?? .nan
            minutes = (Double(String(wholeMinutes)) ?? .nan) + (Double(String(fraction)) ?? .nan) / 10_000
        }
        guard degrees.isFinite, minutes.isFinite, minutes < 60 else { return nil }
        let value = degrees + minutes / 60
        guard value <= maxDegrees else { return nil }
        return letter == negative ? -value : value
    }

    /// A plain decimal (`0.00`, `057.78`, ` 0.62`): digits and at most one dot, nothing else.
    static func number(_ field: Substring) -> Double? {
        let text = field.trimmingSpaces
        guard !text.isEmpty, text.count <= 12, text.filter({ $0 == "." }).count <= 1, text != ".",
            text.allSatisfy({ $0 == "." || ($0.isASCII && $0.isNumber) })
        else { return nil }
        return Double(String(text))
    }

    /// `DDMMYY` as days since 1970, or nil.
    static func date(_ field: Substring) -> Int? {
        let text = Array(field.utf8)
        guard text.count == 6, let day = digits(text, 0, 2), let month = digits(text, 2, 2), let year = digits(text, 4, 2),
            let stamp = CivilTime(year: 2000 + year, month: month, day: day, hour: 0, minute: 0, second: 0).timestamp
        else { return nil }
        return Int(stamp.milliseconds / 86_400_000)
    }

    /// `hhmmss` as seconds since midnight, or nil.
    static func timeOfDay(_ field: Substring) -> Int? {
        let text = Array(field.utf8)
        guard text.count == 6, let hour = digits(text, 0, 2), let minute = digits(text, 2, 2),
            let second = digits(text, 4, 2), hour < 24, minute < 60, second < 60
        else { return nil }
        return hour * 3600 + minute * 60 + second
    }

    // MARK: - Answers

    static func answer(id: String, _ rest: String) -> [UInt8] { Array("*HQ,\(id),\(rest)#".utf8) }

    /// `yyyyMMddHHmmss` of `now` (UTC).
    static func dateTime(_ now: Timestamp) -> String {
        let c = now.components
        var out: [UInt8] = []
        WireText.appendTwoDigits(c.year / 100, to: &out)
        WireText.appendTwoDigits(c.year % 100, to: &out)
        for value in [c.month, c.day, c.hour, c.minute, c.second] { WireText.appendTwoDigits(value, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    /// `HHmmss` of `now` (UTC).
    static func timeOnly(_ now: Timestamp) -> String {
        let c = now.components
        var out: [UInt8] = []
        for value in [c.hour, c.minute, c.second] { WireText.appendTwoDigits(value, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Substring {
    /// Without leading and trailing spaces (H02 pads some numeric fields).
    var trimmingSpaces: Substring {
        var text = self
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}
