import Foundation
import GatewayCore
import NMEA
import ReceiverStream

/// The fixtures (Fixtures/README.md) and ways of feeding them to a decoder.
enum StreamFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(name)")))
    }

    /// Every line of a JSON Lines oracle, as dictionaries.
    static func records(_ name: String) throws -> [[String: Any]] {
        let text = try String(contentsOfFile: "\(directory)/\(name)", encoding: .utf8)
        return try text.split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
    }

    static func json(_ name: String) throws -> Any {
        try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(name)")))
    }

    static let ubxLogs = ["ublox-f9p-rtcm", "ublox-glo", "ublox-lea-m8f", "ublox-neo-m8l", "ublox-neo-m8n", "ublox-neo-m8u-hnr",
                          "ublox-neo-m8u", "ublox-zed-f9p-rtk", "ublox-zed-f9p-sfrbx", "ublox-zed-f9t-ubx_nmea_l5", "ublox8-uniqid-monhw"]
}

/// What a decoder produced from a whole input.
struct Decoded {
    var positions: [Position] = []
    var statistics = NMEAStatistics()
    var antenna: [AntennaStatus] = []
    var reports: [ReceiverReport] = []
}

extension Decoded {
    /// The positions made from NAV-PVT (they carry `eps`; NMEA epochs carry no ``FixDetail``).
    var ubxPositions: [Position] { positions.filter { $0.speedError != nil } }
}

/// Decodes `bytes` in reads of the given sizes (cycled; empty: all at once), then flushes.
func decodeStream(_ bytes: [UInt8], chunks: [Int] = [], options: NMEAOptions = StreamOptions.replay) -> Decoded {
    var decoder = ReceiverStreamDecoder(options: options)
    var out = Decoded()
    func take() {
        out.antenna += decoder.takeAntennaReports()
        out.reports += decoder.takeReceiverReports()
    }
    if chunks.isEmpty {
        bytes.withUnsafeBytes { decoder.decode($0, into: &out.positions) }
        take()
    } else {
        var offset = 0
        var k = 0
        while offset < bytes.count {
            let n = min(max(1, chunks[k % chunks.count]), bytes.count - offset)
            bytes[offset..<(offset + n)].withUnsafeBytes { decoder.decode($0, into: &out.positions) }
            take()
            offset += n
            k += 1
        }
    }
    decoder.flush(into: &out.positions)
    take()
    out.statistics = decoder.statistics
    return out
}

enum StreamOptions {
    static var replay: NMEAOptions {
        var o = NMEAOptions()
        o.source = "rx"
        o.idPrefix = "rx-"
        return o
    }
}

extension Dictionary where Key == String, Value == Any {
    func int(_ key: String) -> Int { (self[key] as? NSNumber)?.intValue ?? Int.min }
}
