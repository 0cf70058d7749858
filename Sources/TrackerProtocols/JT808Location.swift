import GatewayCore

/// JT/T 808's location: the 28 bytes of basic information every location message carries
/// (0x0200, each item of 0x0704, after the reply serial of 0x0201), then additional items.
///
///     alarm DWORD | status DWORD | latitude DWORD | longitude DWORD | altitude WORD (m, read signed)
///     | speed WORD (0.1 km/h) | course WORD (°) | time BCD[6] YYMMDDhhmmss (device zone, GMT+8 by default)
///     items: id BYTE | length BYTE | value, to the end
///
/// Latitude and longitude are 10⁻⁶ degree, south and west from status bits 2 and 3. Status bit 1
/// says whether the terminal is positioned: an unpositioned report becomes a position with mode
/// `.noFix` that keeps the coordinates the terminal sent (its last known place) unless both are
/// zero, so `quality_filter` and the geofence treat it as what it is, and its alarms and status
/// still reach the sinks.
///
/// Attributes (units in the `jt808` source's README): `ignition` (status bit 0, always),
/// `status` (the status word in hex, always), named status bits when set (``statusNames``),
/// `gnss` (the systems in use), `alarm` (the names of the alarm bits set, comma-separated,
/// ``alarmNames``), and the standard additional items by name (``readItems(_:into:)``); any
/// other item is `jt808.<id>` = its bytes in hex (vendor items, JT/T 1078 video items).
struct JT808Location {
    /// The device clock's offset from UTC in seconds (GMT+8: 28,800).
    var timeZoneOffsetSeconds: Int
    /// The datum the terminal's coordinates are in.
    var datum: Datum

    /// Bytes of the basic information.
    static let basicSize = 28

    /// The position at the start of `bytes` (basic information, then items to the end); nil when
    /// the basic information is not all there or its coordinates are not on Earth.
    func position(_ bytes: UnsafeRawBufferPointer, is2019: Bool) -> Position? {
        var reader = ByteReader(bytes)
        guard let alarm = reader.u32(), let status = reader.u32(), let latitudeRaw = reader.u32(),
              let longitudeRaw = reader.u32(), let altitude = reader.i16(), let speed = reader.u16(),
              let course = reader.u16(), let time = reader.take(6)
        else { return nil }
        var latitude = Double(latitudeRaw) / 1_000_000
        var longitude = Double(longitudeRaw) / 1_000_000
        guard latitude <= 90, longitude <= 180 else { return nil }
        if status & 0x4 != 0 { latitude = -latitude }
        if status & 0x8 != 0 { longitude = -longitude }
        let positioned = status & 0x2 != 0
        var position = Position(time: timestamp(time), altitude: Double(altitude), speed: Double(speed) / 36,
                                course: course < 360 ? Double(course) : nil, mode: positioned ? .threeD : .noFix, datum: datum)
        if positioned || latitudeRaw != 0 || longitudeRaw != 0 {
            position.latitude = latitude
            position.longitude = longitude
        }
        position.attributes["ignition"] = status & 0x1 != 0 ? "true" : "false"
        position.attributes["status"] = WireText.hex(bigEndianBytes(status))
        Self.nameStatus(status, is2019: is2019, into: &position.attributes)
        if alarm != 0 { position.attributes["alarm"] = Self.alarmText(alarm) }
        readItems(UnsafeRawBufferPointer(rebasing: bytes[reader.offset...]), into: &position)
        return position
    }

    /// The BCD time in UTC; nil when it is not a date (all zeros before a first fix, say).
    func timestamp(_ bcd: Slice<UnsafeRawBufferPointer>) -> Timestamp? {
        guard let digits = WireText.bcdDigits(bcd), digits.utf8.count == 12 else { return nil }
        let d = Array(digits.utf8).map { Int($0) - 48 }
        func two(_ k: Int) -> Int { d[k] * 10 + d[k + 1] }
        let civil = CivilTime(year: 2000 + two(0), month: two(2), day: two(4), hour: two(6), minute: two(8), second: two(10))
        guard var time = civil.timestamp else { return nil }
        time.milliseconds -= Int64(timeZoneOffsetSeconds) * 1000
        return time
    }

    // MARK: - Status and alarm bits

    /// Status bits other than 0–3 (ignition, positioned, hemispheres), by bit: an attribute set
    /// to `true` when the bit is set. Bits 18–21 are the `gnss` list; bits 8–9 the `load`.
    static let statusNames: [(bit: UInt32, name: String)] = [
        (4, "out_of_service"), (5, "latlon_encrypted"), (10, "oil_cut"), (11, "circuit_cut"), (12, "doors_locked"),
        (13, "door1"), (14, "door2"), (15, "door3"), (16, "door4"), (17, "door5"),
    ]

    static let systems: [(bit: UInt32, name: String)] = [(18, "gps"), (19, "beidou"), (20, "glonass"), (21, "galileo")]

    static func nameStatus(_ status: UInt32, is2019: Bool, into attributes: inout [String: String]) {
        for (bit, name) in statusNames where status & (1 << bit) != 0 { attributes[name] = "true" }
        switch (status >> 8) & 0x3 {
        case 1: attributes["load"] = "half"
        case 3: attributes["load"] = "full"
        default: break
        }
        let used = systems.filter { status & (1 << $0.bit) != 0 }.map(\.name)
        if !used.isEmpty { attributes["gnss"] = used.joined(separator: ",") }
        // 2019 defines bit 22 (0 stopped, 1 driving); 2013 reserves it.
        if is2019 && status & (1 << 22) != 0 { attributes["driving"] = "true" }
    }

    /// The standard's alarm bits (JT/T 808-2013 table 24, 2019 table 25), by bit. A reserved bit
    /// that is set is named `alarm_bit<N>`.
    static let alarmNames: [String?] = [
        "sos", "overspeed", "fatigue_driving", "dangerous_driving", "gnss_fault", "antenna_open", "antenna_short",
        "power_low", "power_cut", "display_fault", "tts_fault", "camera_fault", "ic_card_fault", "overspeed_warning",
        "fatigue_warning", nil, nil, nil, "driving_overtime_today", "parking_overtime", "area", "route", "route_time",
        "route_deviation", "vss_fault", "fuel_abnormal", "theft", "illegal_ignition", "illegal_movement", "collision",
        "rollover", "illegal_door_open",
    ]

    /// The names of the alarm bits set, lowest bit first, comma-separated.
    static func alarmText(_ alarm: UInt32) -> String {
        var names: [String] = []
        for bit in 0..<32 where alarm & (1 << UInt32(bit)) != 0 {
            names.append(alarmNames[bit] ?? "alarm_bit\(bit)")
        }
        return names.joined(separator: ",")
    }

    // MARK: - Additional items

    /// The additional items: the standard ones by name, satellites into the position, the rest
    /// as `jt808.<id>` hex. An item whose length runs past the body ends the list (what was read
    /// stays); an item of a standard id with a length the standard does not give is kept as hex.
    func readItems(_ bytes: UnsafeRawBufferPointer, into position: inout Position) {
        var reader = ByteReader(bytes)
        while reader.remaining >= 2 {
            guard let id = reader.u8(), let length = reader.u8(), let value = reader.take(Int(length)) else { return }
            let item = UnsafeRawBufferPointer(rebasing: value)
            if !Self.readStandardItem(id, item, into: &position) {
                position.attributes["jt808." + WireText.hex([id])] = WireText.hex(item)
            }
        }
    }

    /// Reads one standard item; false when `id` is not one or its length is not the standard's.
    static func readStandardItem(_ id: UInt8, _ value: UnsafeRawBufferPointer, into position: inout Position) -> Bool {
        var r = ByteReader(value)
        let n = value.count
        switch (id, n) {
        case (0x01, 4):
            // Mileage in 0.1 km, kept in metres as the other trackers' odometers.
            position.attributes["odometer"] = String(UInt64(r.u32() ?? 0) * 100)
        case (0x02, 2):
            position.attributes["fuel"] = WireText.scaled(UInt64(r.u16() ?? 0), decimals: 1)
        case (0x03, 2):
            position.attributes["recorder_speed"] = WireText.scaled(UInt64(r.u16() ?? 0), decimals: 1)
        case (0x04, 2):
            position.attributes["alarm_event_id"] = String(r.u16() ?? 0)
        case (0x11, 1), (0x11, 5):
            let type = r.u8() ?? 0
            position.attributes["overspeed_area_type"] = areaType(type)
            if let area = r.u32() { position.attributes["overspeed_area_id"] = String(area) }
        case (0x12, 6):
            position.attributes["area_type"] = areaType(r.u8() ?? 0)
            position.attributes["area_id"] = String(r.u32() ?? 0)
            position.attributes["area_direction"] = (r.u8() ?? 0) == 0 ? "in" : "out"
        case (0x13, 7):
            position.attributes["route_id"] = String(r.u32() ?? 0)
            position.attributes["route_time"] = String(r.u16() ?? 0)
            position.attributes["route_time_result"] = (r.u8() ?? 0) == 0 ? "short" : "long"
        case (0x25, 4):
            position.attributes["vehicle_signals"] = WireText.hex(value)
        case (0x2A, 2):
            position.attributes["io_status"] = WireText.hex(value)
        case (0x2B, 4):
            let both = r.u32() ?? 0
            position.attributes["analog0"] = String(both & 0xFFFF)
            position.attributes["analog1"] = String(both >> 16)
        case (0x30, 1):
            position.attributes["rssi"] = String(value[0])
        case (0x31, 1):
            position.satellites = Int(value[0])
        default:
            return false
        }
        return true
    }

    /// The area kinds of items 0x11 and 0x12.
    static func areaType(_ code: UInt8) -> String {
        switch code {
        case 0: "none"
        case 1: "circle"
        case 2: "rectangle"
        case 3: "polygon"
        case 4: "route"
        default: String(code)
        }
    }

    private func bigEndianBytes(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
