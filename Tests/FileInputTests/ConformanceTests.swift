import FileInput
import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// The source contract (``SourceConformance``) for the file source. A file has no peer to lose,
/// so there is no reconnect check.
@Suite(.timeLimit(.minutes(1))) struct FileReplayConformanceTests {
    static func make(_ json: String) -> (ComponentContext) throws -> any PositionSource {
        { context in try FileReplayPlugin.makeSource(try PluginOptions.valid(FileReplayPlugin.self, json), context: context) }
    }

    @Test func itStopsWhenCancelledWhilePacedAndWhileLoopingAtFullSpeed() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try NMEASamples.writeLog(epochs: 100, to: dir + "/in.nmea")
        try await SourceConformance.checkCancellation(ready: { _, collector in collector.count >= 1 },
                                                      make: Self.make(#"{"path": "\#(dir)/in.nmea", "rate": "realtime"}"#))
        try await SourceConformance.checkCancellation(ready: { _, collector in collector.count >= 200 },
                                                      make: Self.make(#"{"path": "\#(dir)/in.nmea", "loop": true, "progress": false}"#))
    }

    @Test func badSentencesAreCountedAndSkipped() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try NMEASamples.writeLog(epochs: 100, to: dir + "/good.nmea")
        let good = try String(contentsOfFile: dir + "/good.nmea", encoding: .utf8)
        try ("$GPGGA,garbage*00\r\n\u{0}\u{1}noise\n" + good).write(toFile: dir + "/in.nmea", atomically: true, encoding: .utf8)
        // Paced, so the run is still going when the check looks at the counters.
        let stats = try await SourceConformance.checkBadInputCounted(counters: ["nmea.rejected", "nmea.noise_bytes"], feedGarbage: {},
                                                                     make: Self.make(#"{"path": "\#(dir)/in.nmea", "rate": "realtime"}"#))
        #expect(stats.value("nmea.rejected") + stats.value("nmea.noise_bytes") > 0)
    }
}
