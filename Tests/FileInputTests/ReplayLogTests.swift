import Foundation
@testable import FileInput
import SystemIO
import GatewayCore
import GatewayTesting
import Testing
import EnvironmentChecks

/// What a replay writes to the log: progress of long replays without a terminal, and skipped
/// lines of a binary file escaped and numbered once.
@Suite(.timeLimit(.minutes(1)))
struct ReplayLogTests {
    static func temporaryFile(_ ext: String) -> String { NSTemporaryDirectory() + "locgate-replay-\(UUID().uuidString).\(ext)" }

    @Test func aBinaryJSONLinesFileIsSkippedWithEscapedBytesAndOneLineNumber() async throws {
        let path = Self.temporaryFile("jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let good = #"{"time":"2024-05-01T00:00:00.000Z","lat":52.1,"lon":4.3}"#
        try Data(Array(good.utf8) + [10, 0, 1, 27] + Array("[31mELF".utf8) + [10, 7, 8, 10]).write(to: URL(fileURLWithPath: path))
        let log = RecordingLogHandler()
        let configuration = try PluginOptions.valid(FileReplayPlugin.self, #"{"path": "\#(path)"}"#)
        let context = ComponentContext(id: "rx", kind: .source, logger: log.logger(label: "sources.rx"), stats: ComponentStats(id: "rx"))
        let collector = PositionCollector()
        try await FileReplaySource(configuration: configuration, context: context, terminal: false).run(output: collector.output)
        #expect(collector.count == 1)
        let skipped = log.entries.filter { $0.message.contains("skipped:") }.map(\.message)
        #expect(skipped == [
            #"\#(path):2: skipped: column 1: unexpected character '\u0000'"#,
            #"\#(path):3: skipped: column 1: unexpected character '\u0007'"#,
        ])
        #expect(!log.entries.contains { $0.message.unicodeScalars.contains { $0.value < 0x20 } }, "\(log.entries)")
    }

    @Test func withoutATerminalALongReplayLogsItsProgressEveryTenSeconds() async throws {
        let path = Self.temporaryFile("nmea")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try NMEASamples.writeLog(epochs: 20_000, to: path)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let log = RecordingLogHandler()
        let clock = ManualClock()
        let configuration = try PluginOptions.valid(FileReplayPlugin.self, #"{"path": "\#(path)"}"#)
        let context = ComponentContext(id: "rx", kind: .source, logger: log.logger(label: "sources.rx"), stats: ComponentStats(id: "rx"), clock: clock)
        // A slow downstream: every batch (one chunk of the file) takes 4 s.
        let emitted = PositionCollector()
        let output = SourceOutput { batch in
            emitted.append(batch)
            clock.advance(by: .seconds(4))
        }
        let started = clock.now().milliseconds
        try await FileReplaySource(configuration: configuration, context: context, terminal: false).run(output: output)
        let lines = log.entries.filter { $0.level == .info && $0.message.contains("positions/s") }.map(\.message)
        // Progress is looked at after each 4 s batch, so a line goes out every third batch (12 s).
        let elapsed = clock.now().milliseconds - started
        #expect(elapsed >= 40_000, "the replay took \(elapsed) ms of the manual clock")
        #expect(lines.count == Int(elapsed / 12_000), "\(elapsed) ms: \(lines)")
        let first = try #require(lines.first)
        #expect(first.hasPrefix("\(path): "), "\(first)")
        #expect(first.contains("% (") && first.contains(" of \(FileCheck.formatBytes(UInt64(size))))"), "\(first)")
        let percents = lines.compactMap { Int($0.dropFirst(path.count + 2).prefix { $0.isNumber }) }
        #expect(percents == percents.sorted() && percents.count == lines.count && (percents.last ?? 101) <= 100, "\(percents)")
        // Positions per second over the last 12 s: three chunks' worth.
        let rates = lines.compactMap { $0.split(separator: " ").dropLast().last.flatMap { Int($0) } }
        #expect(rates.allSatisfy { $0 > 100 }, "\(rates)")
        #expect(emitted.count == 20_000)
    }

    @Test func aShortReplayLogsNoProgress() async throws {
        let path = Self.temporaryFile("nmea")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try NMEASamples.writeLog(epochs: 100, to: path)
        let log = RecordingLogHandler()
        let configuration = try PluginOptions.valid(FileReplayPlugin.self, #"{"path": "\#(path)"}"#)
        let context = ComponentContext(id: "rx", kind: .source, logger: log.logger(label: "sources.rx"), stats: ComponentStats(id: "rx"), clock: ManualClock())
        try await FileReplaySource(configuration: configuration, context: context, terminal: false).run(output: PositionCollector().output)
        #expect(!log.entries.contains { $0.message.contains("positions/s") })
    }
}
