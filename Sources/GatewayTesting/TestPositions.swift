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
