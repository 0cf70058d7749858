import GatewayCore

/// The GPS103 protocol of Coban's TK102/TK103/TK303 and the many cheap trackers that copy it:
/// ASCII sentences, each ending at the first `;`, `*` or line feed (the terminator belongs to
/// the sentence; a CR before a line feed is dropped). Over UDP, one sentence per datagram, and
/// the datagram's end ends it. There is no checksum: fields are checked instead.
///
///     ##,imei:359586015829802,A;                               login            → LOAD
///     359586015829802;                                         heartbeat        → ON
///     imei:359586015829802,tracker,0809231429,13554900601,F,062947.294,A,2234.4026,N,11354.3277,E,0.00,;
///           IMEI            keyword local time  phone/RFID  GPS UTC time    fix lat      N/S lon      E/W knots course
///
/// - A sentence of at most 30 bytes holding `imei:` is a login → `.control("login")` answered
///   `LOAD` at once (a device not allowed is closed unanswered).
/// - A sentence of digits is a heartbeat → `.control("heartbeat")` answered `ON`.
/// - `F` (GPS) reports → `.records` with one position. Its time: the sentence's local date and
///   hour:minute (`yyMMddHHmm[ss]` or `yy/MM/dd HH:mm`) with the UTC time's seconds, less the
///   device's offset (local hour:minute less UTC hour:minute, folded into −12…+12 h), so the date
///   is right when UTC is still on the previous day; without a UTC time of six digits the local
///   time is taken as UTC (seconds 0). `A` is a fix; `V` keeps the coordinates with mode
///   `.noFix`. The hemisphere may stand before the number; a missing E/W is east. Speed in
///   knots, course, altitude (m) as given; empty fields are unknown.
/// - `help me` (SOS) → answered `**,imei:<IMEI>,E;` (which stops the device repeating it): with
///   a fix, once the position was handled end to end; without one, at once.
/// - `L` (cell only) → `.control("lbs")`; `OBD` → `.control("obd")`; neither carries a position.
/// - The alternative layout ending in `*` (`imei:…,name,event,sensor,voltage,hhmmss,ddmmyy,rssi,
///   gps status,lat,lon,km/h,course,altitude,hdop,satellites,…`) → `.records`.
///
/// Positions are never answered (the protocol has no acknowledgement for them); the keyword
/// becomes `alarm` (`sos`, `low_battery`, `geofence`, `movement`, `overspeed`, `power_cut`,
/// `vibration`, `door`, `accident`, `bonnet`, `temperature`, `fuel_leak`) or `event` (anything
/// else but `tracker`); `acc on`/`acc off` set `ignition`.
public struct GPS103Codec: TrackerCodec {
    public let limits: TrackerLimits
    /// Each input is one whole sentence (a UDP datagram): its end ends the sentence.
    public let datagrams: Bool
    /// The IMEI the device last gave: commands name it.
    private(set) var lastDeviceID: String?

    public init(limits: TrackerLimits, datagrams: Bool = false) {
        self.limits = limits
        self.datagrams = datagrams
    }

    static func isTerminator(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ";") || byte == UInt8(ascii: "*") || byte == TextFraming.lf
    }

    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        let result = decodeSentence(bytes)
        if case .message(let message, _) = result, let id = message.namedDevice { lastDeviceID = id }
        return result
    }

    private func decodeSentence(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        let (start, result) = TextFraming.skipBreaks(bytes)
        if let result { return result }
        let end: Int
        switch TextFraming.find(bytes, from: start, maxFrameBytes: limits.maxFrameBytes, isEnd: Self.isTerminator) {
        case .found(let index): end = index
        case .needMore:
            guard datagrams else { return .needMore }
            end = bytes.count
        case .tooLarge:
            return .invalid(TrackerFrameError("too_large", "no terminator within \(limits.maxFrameBytes) bytes"),
                            consumed: start + limits.maxFrameBytes, close: false)
        }
        let consumed = min(bytes.count, end + 1)
        let terminator = end < bytes.count ? bytes[end] : 0
        let body = TextFraming.withoutCR(bytes, start..<end)
        switch sentence(UnsafeRawBufferPointer(rebasing: bytes[body]), terminator: terminator) {
        case .success(let message): return .message(message, consumed: consumed)
        case .failure(let error): return .invalid(error, consumed: consumed, close: false)
        }
    }

    /// One sentence without its terminator.
    func sentence(_ text: UnsafeRawBufferPointer, terminator: UInt8) -> Result<TrackerMessage, TrackerFrameError> {
        guard !text.isEmpty, text.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return .failure(TrackerFrameError("syntax", "empty sentence or one with a byte that is not printable ASCII"))
        }
        if let imeiStart = Self.find("imei:", in: text), text.count + 1 <= 30 {
            guard let imei = Self.imei(text, from: imeiStart) else { return .failure(TrackerFrameError("syntax", "login without an IMEI")) }
            return .success(.control(kind: "login", deviceID: imei, answer: TextFraming.ascii("LOAD")))
        }
        if text.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            guard text.count <= 20 else { return .failure(TrackerFrameError("syntax", "heartbeat of \(text.count) digits")) }
            return .success(.control(kind: "heartbeat", deviceID: String(decoding: text, as: UTF8.self), answer: TextFraming.ascii("ON")))
        }
        guard TextNumber.hasPrefix(text, "imei:"), let imei = Self.imei(text, from: 5) else {
            return .failure(TrackerFrameError("syntax", "a sentence that is neither a login, a heartbeat nor imei:<IMEI>,…"))
        }
        let fields = TextFields(text, separator: UInt8(ascii: ","), from: 5 + imei.utf8.count + 1)
        if fields.is(0, "OBD") { return .success(.control(kind: "obd", deviceID: imei, answer: nil)) }
        if terminator == UInt8(ascii: "*"), fields.count >= 17 {
            return alternative(fields, imei: imei)
        }
        return regular(fields, imei: imei)
    }

    /// `keyword, local time, phone, F|L, UTC time, A|V, [N|S,] lat, [N|S,] [E|W,] lon, [E|W], knots, course, altitude, …`.
    private func regular(_ fields: TextFields, imei: String) -> Result<TrackerMessage, TrackerFrameError> {
        let keyword = fields.text(0) ?? ""
        let sos = keyword == "help me" ? TextFraming.ascii("**,imei:\(imei),E;") : nil
        guard fields.is(3, "F") else {
            guard fields.is(3, "L") || fields.count < 4 || fields.isEmpty(3) else {
                return .failure(TrackerFrameError("syntax", "the fix field is neither F nor L"))
            }
            return .success(.control(kind: "lbs", deviceID: imei, answer: sos))
        }
        let valid: Bool
        if fields.is(5, "A") { valid = true } else if fields.is(5, "V") { valid = false } else {
            return .failure(TrackerFrameError("syntax", "validity field"))
        }
        // The hemisphere letters may stand before or after each number.
        var index = 6
        func letter(_ a: StaticString, _ b: StaticString) -> Bool? {
            if fields.is(index, a) { index += 1; return false }
            if fields.is(index, b) { index += 1; return true }
            return nil
        }
        var south = letter("N", "S")
        guard let latitude = TextNumber.degreesMinutes(fields[index]) else { return .failure(TrackerFrameError("syntax", "latitude field")) }
        index += 1
        if south == nil { south = letter("N", "S") }
        var west = letter("E", "W")
        guard let longitude = TextNumber.degreesMinutes(fields[index]) else { return .failure(TrackerFrameError("syntax", "longitude field")) }
        index += 1
        if west == nil {
            west = letter("E", "W")
            if west == nil, fields.isEmpty(index), index < fields.count - 1 { index += 1 }
        }
        let speed = fields.decimal(index), course = fields.decimal(index + 1), altitude = fields.decimal(index + 2)
        if (speed == nil && !fields.isEmpty(index)) || (course == nil && !fields.isEmpty(index + 1)) {
            return .failure(TrackerFrameError("syntax", "speed or course field"))
        }
        guard var position = TextFix.position(
            time: Self.time(local: fields[1], utc: fields[4]), latitude: south == true ? -latitude : latitude,
            longitude: west == true ? -longitude : longitude, valid: valid, altitude: altitude,
            speedKmh: speed.map { $0 * 1.852 }, course: course)
        else { return .failure(TrackerFrameError("syntax", "coordinates off the Earth")) }
        Self.describe(keyword, into: &position)
        return .success(.records(TrackerRecords(deviceID: imei, positions: [position], answer: sos)))
    }

    /// `name, event, sensor id, sensor voltage, hhmmss, ddmmyy, rssi, gps status, lat, lon, km/h, course, altitude, hdop, satellites, …`.
    private func alternative(_ fields: TextFields, imei: String) -> Result<TrackerMessage, TrackerFrameError> {
        guard let latitude = fields.decimal(8), let longitude = fields.decimal(9),
              var position = TextFix.position(
                  time: TextTime.instant(date: fields[5], "ddMMyy", time: fields[4], "HHmmss"),
                  latitude: latitude, longitude: longitude, valid: (fields.integer(7) ?? 0) > 0, altitude: fields.decimal(12),
                  speedKmh: fields.decimal(10), course: fields.decimal(11), satellites: fields.integer(14))
        else { return .failure(TrackerFrameError("syntax", "alternative report fields")) }
        position.hdop = fields.decimal(13)
        if let event = fields.text(1), !event.hasPrefix("-") { position.attributes["event"] = event }
        return .success(.records(TrackerRecords(deviceID: imei, positions: [position], answer: nil)))
    }

    /// The fix's UTC instant from the local date and time and the UTC time of day.
    static func time(local: Slice<UnsafeRawBufferPointer>, utc: Slice<UnsafeRawBufferPointer>) -> Timestamp? {
        var civil = CivilTime(year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0)
        let read = TextTime.read(local, "yyMMddHHmm", into: &civil) || TextTime.read(local, "yyMMddHHmmss", into: &civil)
            || TextTime.read(local, "yy/MM/dd HH:mm", into: &civil)
        guard read else { return nil }
        civil.second = 0
        // The UTC time of day: hhmmss with any fraction.
        let whole = utc.firstIndex(of: UInt8(ascii: ".")) ?? utc.endIndex
        guard whole - utc.startIndex == 6, let hour = TextNumber.digits(utc, at: 0, count: 2),
              let minute = TextNumber.digits(utc, at: 2, count: 2), let second = TextNumber.digits(utc, at: 4, count: 2),
              hour < 24, minute < 60, second < 60
        else { return civil.timestamp }
        var offset = (civil.hour * 60 + civil.minute) - (hour * 60 + minute)
        if offset > 720 { offset -= 1440 } else if offset < -720 { offset += 1440 }
        civil.second = second
        guard let stamp = civil.timestamp else { return nil }
        return Timestamp(milliseconds: stamp.milliseconds - Int64(offset) * 60_000)
    }

    /// The keyword as an alarm, an event or ignition.
    static func describe(_ keyword: String, into position: inout Position) {
        let alarms = ["help me": "sos", "low battery": "low_battery", "stockade": "geofence", "move": "movement",
                      "speed": "overspeed", "door alarm": "door", "ac alarm": "power_cut", "accident alarm": "accident",
                      "sensor alarm": "vibration", "bonnet alarm": "bonnet", "footbrake alarm": "foot_brake"]
        if let alarm = alarms[keyword] {
            position.attributes["alarm"] = alarm
        } else if keyword.hasPrefix("T:") {
            position.attributes["alarm"] = "temperature"
        } else if keyword.hasPrefix("oil") {
            position.attributes["alarm"] = "fuel_leak"
        } else if keyword == "acc on" || keyword == "acc off" {
            position.attributes["ignition"] = keyword == "acc on" ? "true" : "false"
        } else if !keyword.isEmpty, keyword != "tracker" {
            position.attributes["event"] = keyword
        }
    }

    /// The digits after `imei:` up to the next comma (or the end).
    static func imei(_ text: UnsafeRawBufferPointer, from start: Int) -> String? {
        var end = start
        while end < text.count, text[end] >= 48, text[end] <= 57 { end += 1 }
        guard end > start, end - start <= 20, end == text.count || text[end] == UInt8(ascii: ",") else { return nil }
        return String(decoding: text[start..<end], as: UTF8.self)
    }

    /// Where `word` ends in `text` (the index after it), or nil.
    static func find(_ word: StaticString, in text: UnsafeRawBufferPointer) -> Int? {
        word.withUTF8Buffer { needle in
            guard text.count >= needle.count else { return nil }
            for start in 0...(text.count - needle.count) where text[start..<(start + needle.count)].elementsEqual(needle) {
                return start + needle.count
            }
            return nil
        }
    }
}
