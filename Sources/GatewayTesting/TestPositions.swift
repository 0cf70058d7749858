import GatewayCore

/// Positions `<prefix><from>` … `<prefix><to-1>`, one second apart from 2024-05-01T10:00:00Z,
/// moving north-east from Shanghai (31.2, 121.5) by 1e-5° each, 3D GPS fixes, on `devices`
/// devices in turn (`dev0`, `dev1`, …), from source `rx`: the test traffic of every sink's tests.
public func positions(_ range: Range<Int>, prefix: String = "t-", devices: Int = 1, datum: Datum = .wgs84) -> [Position] {
    range.map { i in
        Position(time: Timestamp(milliseconds: 1_714_557_600_000 + Int64(i) * 1000), latitude: 31.2 + Double(i) * 1e-5,
                 longitude: 121.5 + Double(i) * 1e-5, altitude: 12.5, speed: 2.5, course: 90, mode: .threeD, quality: .gps,
                 satellites: 9, hdop: 0.9, horizontalError: 4.5, datum: datum, source: "rx", device: "dev\(i % devices)",
                 id: "\(prefix)\(i)")
    }
}

/// Numbered ids and the text each must read as: the edges of the number (0, one and two digits,
/// Int64's ends), a marker, an empty prefix and one with characters JSON escapes. Shared by the
/// id's own tests (GatewayCoreTests) and the JSON encoder's, which writes the parts directly
/// (PositionEncodingTests).
public let numberedIDCases: [(PositionID, String)] = [
    (PositionID(prefix: "rx-", number: 1_584_538_100_600), "rx-1584538100600"),
    (PositionID(prefix: "rx-", marker: UInt8(ascii: "n"), number: 7), "rx-n7"),
    (PositionID(prefix: "", number: 0), "0"),
    (PositionID(prefix: "a\"b\\", number: -42), "a\"b\\-42"),
    (PositionID(prefix: "p", number: Int64.min), "p-9223372036854775808"),
    (PositionID(prefix: "p", number: Int64.max), "p9223372036854775807"),
    (PositionID(prefix: "p", number: 9), "p9"),
    (PositionID(prefix: "p", number: 10), "p10"),
]
