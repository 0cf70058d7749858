import GatewayCore

/// Suntech's protocols (SA200, ST300/ST340/ST390, ST500/ST600, ST910, ST4xx, and the
/// "universal" firmware of the ST300/ST4300 families): `;`-separated text reports, plus two
/// binary forms (``SuntechBinary``).
///
///     ST300STT;007238270;40;313;20190220;12:05:04;c99e48;+04.644623;-074.076922;010.390;202.77;20;1;997100;14.10;100000;2;8384;…
///     prefix+type id    model version date   time(UTC) cell  lat         lon       km/h    course sats fix odometer power io …
///
/// Framing: a text report ends at a CR; only a report carrying serial data (`UEX`) or a crash
/// report (`CRR`) may hold `\r\n` inside, so there a CR followed by a line feed is data, and a CR
/// that is the last byte read waits for the next byte (over UDP the datagram's end ends it). A
/// frame starting `02` is a compressed (zip) report of `1 + 2 + length + 1` bytes ending `03`;
/// one whose second byte is `00` is a universal binary report (`0x81` STT, `0x82` ALT) of
/// `1 + 2 + length` bytes.
///
/// - Legacy `<model><type>` reports: `STT` (status), `EMG` (emergency), `EVT` (event), `ALT`
///   (alert), `UEX` (serial data) → `.records`: the model decides the fields before the time
///   (a model number on ST3xx/ST500/ST600) and the cell fields after it (none on ST500, five on
///   ST600). `<model>CMD;Res;…` → `.commandReply("command_result")`, `ALV` → `.control("keep_alive")`,
///   `HTE` (a trip summary, no fix of its own) → `.control("trip")`.
/// - `ST910;Location|Emergency|Alert;id;…`: a cell field after the time when the report has
///   one (Traccar's protocol type 1) — found by its lack of a decimal point.
/// - `ST4xx<type>`: seven cells, battery, archive flag, index, status, then the time and fix
///   (an empty time: no fix → `.control("no_fix")`).
/// - Universal `STT`, `ALT`, `UEX`, `BLE`: the map (hex) says which fields follow (bit 1 model,
///   2 version, 3 message type — `0` is a stored report, marked `late` —, 4–5 date and time,
///   6–10 cell, 11–12 latitude and longitude, 13 km/h, 14 course, 15 satellites, 16 fix);
///   `BLE` has a fixed map. `RES` → `.commandReply("command_result")`; `BSA`, `ALV`… → `.control`.
///
/// Suntech devices expect no answer to anything: nothing is ever answered, so a report written
/// to a connection that then drops is not sent again by the device.
public struct SuntechCodec: TrackerCodec {
    public let limits: TrackerLimits
    /// Each input is one whole report (a UDP datagram).
    public let datagrams: Bool
    /// The id the device last gave: commands name it.
    private(set) var lastDeviceID: String?
    /// The header of the device's last legacy report (`ST300STT`): commands start with its model.
    private(set) var legacyHeader: String?
    /// The device's last report was universal (a 3-letter header, or binary): commands take the universal form.
    private(set) var universal = false

    public init(limits: TrackerLimits, datagrams: Bool = false) {
        self.limits = limits
        self.datagrams = datagrams
    }

    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        let result = decodeReport(bytes)
        if case .message(let message, _) = result, let id = message.namedDevice { lastDeviceID = id }
        return result
    }

    private mutating func decodeReport(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        var start = 0
        while start < bytes.count, bytes[start] == TextFraming.lf || bytes[start] == TextFraming.cr { start += 1 }
        guard start + 1 < bytes.count || (start < bytes.count && datagrams) else {
            return start > 2 ? .invalid(TrackerFrameError("syntax", "line breaks without a report"), consumed: start, close: false) : .needMore
        }
        if bytes[start] == 0x02 || (start + 1 < bytes.count && bytes[start + 1] == 0) {
            return binary(bytes, start: start)
        }
        // A report with serial data (or a crash report) may hold \r\n inside.
        let firstField = bytes[start..<min(bytes.count, start + 12)]
        let dataInside = firstField.split(separator: UInt8(ascii: ";"), maxSplits: 1, omittingEmptySubsequences: false).first
            .map { TextNumber.hasPrefix($0, "CRR") || $0.count >= 3 && $0.suffix(3).elementsEqual("UEX".utf8) } ?? false
        var index = start
        let limit = min(bytes.count, start + limits.maxFrameBytes)
        while index < limit {
            if bytes[index] == TextFraming.cr {
                if !dataInside { break }
                if index + 1 < bytes.count, bytes[index + 1] != TextFraming.lf { break }
                if index + 1 == bytes.count, datagrams { break }
                if index + 1 == bytes.count { return .needMore }
            }
            index += 1
        }
        if index == limit {
            if bytes.count - start >= limits.maxFrameBytes {
                return .invalid(TrackerFrameError("too_large", "no CR within \(limits.maxFrameBytes) bytes"),
                                consumed: start + limits.maxFrameBytes, close: false)
            }
            guard datagrams else { return .needMore }
        }
        let consumed = min(bytes.count, index + 1)
        let message = report(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        return .message(message, consumed: consumed)
    }

    private mutating func binary(_ bytes: UnsafeRawBufferPointer, start: Int) -> TrackerDecodeResult {
        guard let length = bigEndian(bytes, at: start + 1, width: 2).map(Int.init) else { return .needMore }
        let zip = bytes[start] == 0x02
        let total = 3 + length + (zip ? 1 : 0)
        guard total <= limits.maxFrameBytes else {
            return .invalid(TrackerFrameError("too_large", "a binary report of \(total) bytes"), consumed: start + 1, close: false)
        }
        guard bytes.count - start >= total else { return .needMore }
        let frame = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + total)])
        if zip, frame[total - 1] != 0x03 {
            return .invalid(TrackerFrameError("stop_bytes", "a zip report without its 03"), consumed: start + 1, close: false)
        }
        let decoded = zip ? SuntechBinary.zip(frame) : SuntechBinary.universal(frame)
        guard let (id, position) = decoded else {
            return .invalid(TrackerFrameError("syntax", "binary report fields"), consumed: start + total, close: false)
        }
        universal = true
        return .message(.records(TrackerRecords(deviceID: id, positions: [position], answer: nil)), consumed: start + total)
    }

    /// One text report without its CR.
    mutating func report(_ text: UnsafeRawBufferPointer) -> TrackerMessage {
        let fields = TextFields(text, separator: UInt8(ascii: ";"))
        let prefix = fields[0]
        guard let header = TextNumber.printable(prefix, limit: 16), !header.isEmpty else {
            return .control(kind: "other", deviceID: nil, answer: nil)
        }
        if header == "CRR" { return .control(kind: "crash_report", deviceID: Self.id(fields, 1), answer: nil) }
        if header == "RES" {
            // A universal command's result: `RES; id; group; action; …`.
            return Self.result(fields, id: 1, action: 2...3)
        }
        if header.hasSuffix("CMD"), fields.is(1, "Res") {
            // A legacy command's result: `<model>CMD; Res; id; version; action; …`.
            return Self.result(fields, id: 2, action: 4...4)
        }
        let message: TrackerMessage
        if header.utf8.count < 5 {
            message = universal(fields, header: header)
        } else if header.hasSuffix("HTE") {
            message = .control(kind: "trip", deviceID: Self.id(fields, 1), answer: nil)
        } else if header.hasPrefix("ST9") {
            message = st910(fields)
        } else if header.hasPrefix("ST4") {
            message = st4xx(fields, type: String(header.dropFirst(5)))
        } else if header.hasPrefix("S") {
            message = legacy(fields, model: String(header.prefix(5)), type: String(header.dropFirst(5)))
        } else {
            return .control(kind: "other", deviceID: nil, answer: nil)
        }
        // The form of the device's reports is the form of its commands.
        if case .records = message {
            universal = header.utf8.count < 5
            legacyHeader = universal ? nil : header
        }
        return message
    }

    /// A command's result: `action` names the command (``outcome(of:sent:)``), the fields after it are its text.
    static func result(_ fields: TextFields, id: Int, action: ClosedRange<Int>) -> TrackerMessage {
        let reference = action.map { fields.text($0) ?? "" }.joined(separator: ";")
        let text = fields.rest(from: action.upperBound + 1, separator: UInt8(ascii: ";"))
        return .commandReply(kind: "command_result", deviceID: Self.id(fields, id), reply: TrackerCommandReply(reference: Array(reference.utf8), text: text),
                             answer: nil)
    }

    static func id(_ fields: TextFields, _ index: Int) -> String? {
        GL200Codec.isID(fields[index]) ? String(decoding: fields[index], as: UTF8.self) : nil
    }

    static func records(_ id: String, _ position: Position?, kind: String) -> TrackerMessage {
        guard let position else { return .control(kind: "undecoded", deviceID: id, answer: nil) }
        return .records(TrackerRecords(deviceID: id, positions: [position], answer: nil, kind: kind))
    }

    /// Legacy: `id; [model;] version; date; time; [cell; [mcc; mnc; lac; rx;]] lat; lon; km/h; course; sats; fix; odometer; power; io; …`.
    private func legacy(_ fields: TextFields, model: String, type: String) -> TrackerMessage {
        guard let id = Self.id(fields, 1) else { return .control(kind: "other", deviceID: nil, answer: nil) }
        guard ["STT", "EMG", "EVT", "ALT", "UEX"].contains(type) else {
            return .control(kind: type == "ALV" ? "keep_alive" : "other", deviceID: id, answer: nil)
        }
        var index = 2
        if model.hasPrefix("ST3") || model == "ST500" || model == "ST600" { index += 1 }
        index += 1  // version
        let time = TextTime.instant(date: fields[index], "yyyyMMdd", time: fields[index + 1], "HH:mm:ss")
        index += 2
        if model != "ST500" { index += model == "ST600" ? 5 : 1 }
        var position = Self.fix(fields, at: index, time: time, satellites: true)
        if let io = fields.text(index + 8), io.count >= 6, position != nil {
            position?.attributes["ignition"] = io.hasPrefix("1") ? "true" : "false"
        }
        if let odometer = fields.integer(index + 6) { position?.attributes["odometer"] = String(odometer) }
        if let power = fields.decimal(index + 7) { position?.attributes["power"] = String(power) }
        if type != "STT" { position?.attributes["report"] = type }
        return Self.records(id, position, kind: type)
    }

    /// `lat; lon; km/h; course; [satellites;] fix` at `index`; nil when the coordinates are not numbers.
    static func fix(_ fields: TextFields, at index: Int, time: Timestamp?, satellites: Bool) -> Position? {
        guard let latitude = fields.decimal(index), let longitude = fields.decimal(index + 1) else { return nil }
        let fixIndex = index + (satellites ? 5 : 4)
        return TextFix.position(time: time, latitude: latitude, longitude: longitude, valid: fields.is(fixIndex, "1"),
                                speedKmh: fields.decimal(index + 2), course: fields.decimal(index + 3),
                                satellites: satellites ? fields.integer(index + 4) : nil)
    }

    /// `ST910; type; id; [version;] date; time; [cell;] lat; lon; km/h; course; fix; …`.
    private func st910(_ fields: TextFields) -> TrackerMessage {
        guard let id = Self.id(fields, 2) else { return .control(kind: "other", deviceID: nil, answer: nil) }
        guard fields.is(1, "Location") || fields.is(1, "Emergency") || fields.is(1, "Alert") else {
            return .control(kind: "other", deviceID: id, answer: nil)
        }
        var index = TextTime.instant(fields[3], "yyyyMMdd") != nil ? 3 : 4
        let time = TextTime.instant(date: fields[index], "yyyyMMdd", time: fields[index + 1], "HH:mm:ss")
        index += 2
        if !TextNumber.hasDot(fields[index]) { index += 1 }
        var position = Self.fix(fields, at: index, time: time, satellites: false)
        if !fields.is(1, "Location") { position?.attributes["alarm"] = "general" }
        return Self.records(id, position, kind: "ST910")
    }

    /// `<header>; id; version; model; [variant;] 7 × cell; battery; archive; index; status; …; date; time; lat; lon; km/h; course; sats; fix`.
    private func st4xx(_ fields: TextFields, type: String) -> TrackerMessage {
        guard let id = Self.id(fields, 1) else { return .control(kind: "other", deviceID: nil, answer: nil) }
        guard type == "STT" || type == "ALT" else { return .control(kind: "other", deviceID: id, answer: nil) }
        // The date is after the seven cells (six fields each) and four more fields.
        var index = 4 + (fields.is(3, "41") ? 1 : 0) + 42 + 4
        while index + 1 < fields.count, TextTime.instant(date: fields[index], "yyyyMMdd", time: fields[index + 1], "HH:mm:ss") == nil {
            if fields.isEmpty(index), fields.isEmpty(index + 1) { return .control(kind: "no_fix", deviceID: id, answer: nil) }
            index += 1
        }
        guard index + 1 < fields.count else { return .control(kind: "no_fix", deviceID: id, answer: nil) }
        var position = Self.fix(fields, at: index + 2, time: TextTime.instant(date: fields[index], "yyyyMMdd", time: fields[index + 1], "HH:mm:ss"),
                                satellites: true)
        if let battery = fields.decimal(4 + (fields.is(3, "41") ? 1 : 0) + 42) { position?.attributes["battery"] = String(battery) }
        return Self.records(id, position, kind: type)
    }

    /// Universal: `header; id; map; fields by map bit…`.
    private func universal(_ fields: TextFields, header: String) -> TrackerMessage {
        let id = Self.id(fields, 1)
        guard let id else { return .control(kind: "other", deviceID: nil, answer: nil) }
        guard ["STT", "ALT", "UEX", "BLE"].contains(header) else {
            return .control(kind: header.lowercased(), deviceID: id, answer: nil)
        }
        let map: UInt64
        var index = 2
        if header == "BLE" {
            map = 0b1_1000_0011_0110
        } else {
            guard let value = fields.hex(2) else { return .control(kind: "undecoded", deviceID: id, answer: nil) }
            map = value
            index = 3
        }
        func has(_ bit: Int) -> Bool { map & (1 << UInt64(bit)) != 0 }
        func take(_ bit: Int) -> Int? {
            guard has(bit) else { return nil }
            defer { index += 1 }
            return index
        }
        _ = take(1)
        _ = take(2)
        let stored = take(3).map { fields.is($0, "0") } ?? false
        let date = take(4), clock = take(5)
        for bit in 6...10 { _ = take(bit) }
        let latitude = take(11).flatMap { fields.decimal($0) }, longitude = take(12).flatMap { fields.decimal($0) }
        let speed = take(13).flatMap { fields.decimal($0) }, course = take(14).flatMap { fields.decimal($0) }
        let satellites = take(15).flatMap { fields.integer($0) }
        let valid = take(16).map { fields.is($0, "1") } ?? (header == "BLE")
        var time: Timestamp?
        if let date, let clock { time = TextTime.instant(date: fields[date], "yyyyMMdd", time: fields[clock], "HH:mm:ss") }
        guard latitude != nil, longitude != nil, var position = TextFix.position(
            time: time, latitude: latitude, longitude: longitude, valid: valid, speedKmh: speed, course: course, satellites: satellites)
        else { return .control(kind: "undecoded", deviceID: id, answer: nil) }
        if header != "STT" { position.attributes["report"] = header }
        if stored { LateFixes.mark(&position) }
        return Self.records(id, position, kind: header)
    }
}
