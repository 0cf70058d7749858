import Foundation
import GatewayCore
import GatewayTesting
import FileInput
import Testing

/// The file source replays a u-blox log (UBX between NMEA) like the serial port reads it: one
/// position per epoch, from NAV-PVT.
@Suite struct UBXReplayTests {
    @Test func aUBXLogReplaysAsOnePositionPerNavPVTEpoch() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ReceiverStreamTests/Fixtures/synthetic/synthetic-rtk.ubx").path
        let context = ComponentContext(id: "replay", kind: .source, logger: RecordingLogHandler().logger(label: "sources.replay"),
                                       stats: ComponentStats(id: "sources.replay"), clock: .system)
        var reader = try PositionFileReader(configuration: FileReplayConfiguration(path: path), context: context, idPrefix: "r-")
        defer { reader.close() }
        var all: [Position] = []
        while let batch = try reader.next() { all += batch }
        // 13 epochs, each NAV-PVT + GGA + RMC: NAV-PVT wins (RTK status, accuracies).
        #expect(all.count == 13)
        #expect(all.map { $0.quality?.name ?? "-" }.prefix(4) == ["gps", "dgps", "rtk_float", "rtk_fixed"])
        #expect(all.allSatisfy { $0.speedError != nil && $0.attributes.isEmpty })
    }
}
