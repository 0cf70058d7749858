import Foundation
import FileInput
import GatewayCore
import GatewayTesting
import Testing

/// A looped replay keeps its pace across the end of the file and never spins.
@Suite(.timeLimit(.minutes(1)))
struct LoopTests {
    func run(_ json: String, clock: ManualClock, collector: PositionCollector) throws -> Task<Void, any Error> {
        let configuration = try PluginOptions.valid(FileReplayPlugin.self, json)
        let context = ComponentContext(id: "rx", kind: .source, logger: Logger(label: "sources.rx", handler: SilentLogHandler()),
                                       stats: ComponentStats(id: "rx"), clock: clock)
        let source = try FileReplayPlugin.makeSource(configuration, context: context)
        return Task { try await source.run(output: collector.output) }
    }

    /// A one-epoch file at 10x used to loop as fast as the machine went (25,000 positions in 6 s).
    @Test func aPacedLoopOfOneEpochWaitsOneEpochPerPass() async throws {
        let path = NSTemporaryDirectory() + "locgate-loop-\(UUID().uuidString).nmea"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try NMEASamples.epoch(0).write(toFile: path, atomically: true, encoding: .utf8)
        let clock = ManualClock()
        let collector = PositionCollector()
        let task = try run(#"{"path": "\#(path)", "loop": true, "rate": "10x"}"#, clock: clock, collector: collector)
        defer { task.cancel() }
        #expect(await Poll.until { collector.count == 1 && clock.sleeperCount == 1 })
        #expect(collector.count == 1, "a second pass went out without waiting")
        clock.advance(by: .milliseconds(100))  // one epoch (1 s) at 10x
        #expect(await Poll.until { collector.count == 2 && clock.sleeperCount == 1 })
        #expect(Set(collector.positions.map(\.id)).count == 2, "each pass has its own ids")
    }

    @Test func aLoopOverAFileWithoutPositionsWaitsInsteadOfSpinning() async throws {
        let path = NSTemporaryDirectory() + "locgate-loop-\(UUID().uuidString).nmea"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "$GPRMC,garbage*00\r\n".write(toFile: path, atomically: true, encoding: .utf8)
        let clock = ManualClock()
        let collector = PositionCollector()
        let task = try run(#"{"path": "\#(path)", "loop": true}"#, clock: clock, collector: collector)
        defer { task.cancel() }
        // Blocked in its one-second wait, not reading the file again and again.
        #expect(await Poll.until { clock.sleeperCount == 1 })
        #expect(collector.count == 0)
    }
}
