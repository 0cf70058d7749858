import FileOutput
import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// The sink contract (``SinkConformance``) for the file sink: what it acknowledges is in the file.
@Suite(.timeLimit(.minutes(2))) struct FileSinkConformanceTests {
    static func make(_ path: String) -> (ComponentContext) throws -> any PositionSink {
        { context in try FileSinkPlugin.makeSink(try PluginOptions.valid(FileSinkPlugin.self, #"{"path":"\#(path)"}"#), context: context) }
    }

    /// The ids of the JSON Lines records in `path` (none while it does not exist).
    static func ids(_ path: String) -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { (try? JSONValue.parse(string: String($0)))?["id"]?.stringValue }
    }

    @Test func everyPositionIsWrittenAndCounted() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkDeliversAndCounts(positions(0..<250), make: Self.make(dir + "/out.jsonl")) { Self.ids(dir + "/out.jsonl") }
    }

    @Test func aBatchIsAcknowledgedOnlyOnceItIsInTheFile() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkAcknowledgesOnlyAfterCommit(positions(0..<100), make: Self.make(dir + "/out.jsonl")) {
            Set(Self.ids(dir + "/out.jsonl"))
        }
    }

    @Test func itStopsWhenCancelled() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await SinkConformance.checkCancellation(positions(0..<10), make: Self.make(dir + "/out.jsonl"))
    }
}
