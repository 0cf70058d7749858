import GatewayCore

/// The binary cache batches of Meitrack (`CCC` and `CCE`): positions a device stored while it
/// could not send, little-endian. Each position is marked `late` (``LateFixes``).
///
/// `CCC`: protocol version WORD | packet length WORD (52) | remaining cache DWORD | packets:
///
///     event BYTE | lat INT (1e-6°) | lon INT | time DWORD (s since 2000-01-01 UTC) | fix BYTE (1 = valid)
///     | satellites BYTE | gsm BYTE | km/h WORD | course WORD | hdop WORD (0.1) | altitude WORD (m)
///     | mileage DWORD (m) | runtime DWORD (s) | MCC, MNC, LAC, cell WORD each | io WORD | 3 analog WORDs | geofence DWORD
///
/// `CCE`: remaining cache DWORD | count WORD | per packet: length WORD | index WORD | four
/// parameter groups (ids of one byte, or two when the first is `FE`; each group a count BYTE,
/// then values of 1, 2 and 4 bytes, then values with a length BYTE). Read: 0x01/0x40 event,
/// 0x05 fix, 0x06 satellites, 0x07 gsm, 0x08 km/h, 0x09 course, 0x0A hdop (0.1), 0x0B altitude
/// (signed), 0x02/0x03 latitude/longitude (1e-6°), 0x04 time, 0x0C mileage, 0x0D runtime.
enum MeitrackBinary {
    /// Seconds from 1970 to 2000-01-01.
    static let epoch2000: Int64 = 946_684_800

    /// The packets of a `CCC` batch, or nil when the batch is cut short.
    static func fixedPackets(_ body: UnsafeRawBufferPointer) -> [Position]? {
        var reader = ByteReader(body)
        guard reader.le16() != nil, let packetLength = reader.le16().map(Int.init), reader.le32() != nil, packetLength >= 52 else { return nil }
        var positions: [Position] = []
        while reader.remaining >= packetLength {
            let start = reader.offset
            guard let event = reader.u8(), let lat = reader.leI32(), let lon = reader.leI32(), let seconds = reader.le32(),
                  let fix = reader.u8(), let satellites = reader.u8(), let gsm = reader.u8(), let speed = reader.le16(),
                  let course = reader.le16(), let hdop = reader.le16(), let altitude = reader.leI16(), let mileage = reader.le32(),
                  let runtime = reader.le32(),
                  var position = TextFix.position(
                      time: Timestamp(milliseconds: (epoch2000 + Int64(seconds)) * 1000), latitude: Double(lat) / 1e6,
                      longitude: Double(lon) / 1e6, valid: fix == 1, altitude: Double(altitude), speedKmh: Double(speed),
                      course: Double(course), satellites: Int(satellites))
            else { return nil }
            position.hdop = Double(hdop) / 10
            position.attributes["event"] = String(event)
            position.attributes["gsm_signal"] = String(gsm)
            position.attributes["odometer"] = String(mileage)
            position.attributes["runtime"] = String(runtime)
            LateFixes.mark(&position)
            positions.append(position)
            reader.seek(start + packetLength)
        }
        return positions.isEmpty ? nil : positions
    }

    /// The packets of a `CCE` batch, or nil when one is cut short or has no coordinates.
    static func codedPackets(_ body: UnsafeRawBufferPointer) -> [Position]? {
        var reader = ByteReader(body)
        guard reader.le32() != nil, let count = reader.le16(), count > 0 else { return nil }
        var positions: [Position] = []
        for _ in 0..<count {
            guard let length = reader.le16().map(Int.init), let packet = reader.take(length),
                  var position = codedPacket(UnsafeRawBufferPointer(rebasing: packet))
            else { return nil }
            LateFixes.mark(&position)
            positions.append(position)
        }
        return positions
    }

    /// One parameter-coded packet: index WORD, then four groups.
    static func codedPacket(_ packet: UnsafeRawBufferPointer) -> Position? {
        var reader = ByteReader(packet)
        guard reader.le16() != nil else { return nil }
        var values: [UInt16: Int64] = [:]
        for width in [1, 2, 4] {
            guard let count = reader.u8() else { return nil }
            for _ in 0..<count {
                guard let id = parameterID(&reader), let value = reader.littleEndian(width: width) else { return nil }
                values[id] = Int64(value)
            }
        }
        // Values with a length (cells, Wi-Fi, sensors): skipped. A packet may end before this group.
        if let count = reader.u8() {
            for _ in 0..<count {
                guard parameterID(&reader) != nil, let length = reader.u8(), reader.take(Int(length)) != nil else { break }
            }
        }
        guard let lat = values[0x02], let lon = values[0x03] else { return nil }
        let signed = { (raw: Int64) in Int64(Int32(truncatingIfNeeded: raw)) }
        guard var position = TextFix.position(
            time: values[0x04].map { Timestamp(milliseconds: (epoch2000 + $0) * 1000) },
            latitude: Double(signed(lat)) / 1e6, longitude: Double(signed(lon)) / 1e6, valid: (values[0x05] ?? 0) > 0,
            altitude: values[0x0B].map { Double(Int16(truncatingIfNeeded: $0)) }, speedKmh: values[0x08].map(Double.init),
            course: values[0x09].map(Double.init), satellites: values[0x06].map(Int.init))
        else { return nil }
        position.hdop = values[0x0A].map { Double($0) / 10 }
        for (name, id) in [("event", UInt16(0x40)), ("gsm_signal", 0x07), ("odometer", 0x0C), ("runtime", 0x0D)] {
            if let value = values[id] ?? (id == 0x40 ? values[0x01] : nil) { position.attributes[name] = String(value) }
        }
        return position
    }

    /// A parameter id: one byte, or two when the first is `FE`.
    static func parameterID(_ reader: inout ByteReader) -> UInt16? {
        guard let first = reader.u8() else { return nil }
        guard first == 0xFE else { return UInt16(first) }
        return reader.u8().map { 0xFE00 | UInt16($0) }
    }
}

extension ByteReader {
    mutating func le16() -> UInt16? { littleEndian(width: 2).map { UInt16(truncatingIfNeeded: $0) } }
    mutating func le32() -> UInt32? { littleEndian(width: 4).map { UInt32(truncatingIfNeeded: $0) } }
    mutating func leI16() -> Int16? { le16().map { Int16(bitPattern: $0) } }
    mutating func leI32() -> Int32? { le32().map { Int32(bitPattern: $0) } }
}
