import Foundation
import Synchronization
import GatewayCore
import GatewayTesting
import LineTail
import Testing

/// A fresh scratch directory for one test.
private func scratch() throws -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("linetail-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// Appends text to a file, creating it when missing.
private func append(_ text: String, to path: String) throws {
    if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
    let h = try #require(FileHandle(forWritingAtPath: path))
    defer { try? h.close() }
    try h.seekToEnd()
    try h.write(contentsOf: Data(text.utf8))
}

/// Writes an epoch every 100 ms to a file until stopped (the "peer" of the source).
private final class Writer: Sendable {
    let path: String
    private let task: Task<Void, Never>

    init(path: String) {
        self.path = path
        task = Task {
            var n = 0
            while !Task.isCancelled {
                try? append(NMEASamples.epoch(n), to: path)
                n += 1
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    func stop() { task.cancel() }
}

@Suite struct LineTailTests {
    @Test func defaults() throws {
        let c = try PluginOptions.valid(LineTailPlugin.self, #"{ "path": "/tmp/x.nmea" }"#)
        #expect(c.path == "/tmp/x.nmea")
        #expect(c.pollInterval == .milliseconds(200))
        #expect(c.device == nil)
        #expect(c.fromStart == false)
    }

    @Test func relativePathsFollowTheConfigFile() throws {
        let c = try PluginOptions.valid(LineTailPlugin.self, #"{ "path": "log/a.nmea" }"#, baseDirectory: "/etc/locgate")
        #expect(c.path == "/etc/locgate/log/a.nmea")
    }

    @Test(arguments: [
        (#"{ }"#, "sources.under_test.path"),
        (#"{ "path": "" }"#, "sources.under_test.path"),
        (#"{ "path": "a", "poll_interval": "1ms" }"#, "sources.under_test.poll_interval"),
        (#"{ "path": "a", "from_start": "yes" }"#, "sources.under_test.from_start"),
        (#"{ "path": "a", "speed": 1 }"#, "sources.under_test.speed"),
    ])
    func reportsProblemsWithTheirPath(json: String, path: String) throws {
        let (_, problems) = try PluginOptions.read(LineTailPlugin.self, json)
        #expect(problems.map(\.path) == [path])
    }

    @Test func readsAppendedSentencesWithTheirIdentity() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/r.nmea"
        try append(NMEASamples.epoch(0), to: path)   // before the start: skipped without from_start
        let c = try PluginOptions.valid(LineTailPlugin.self, #"{ "path": "\#(path)", "device": "boat", "poll_interval": "20ms" }"#)
        let context = SourceConformance.makeContext()
        let collector = PositionCollector()
        let task = Task { try await LineTailPlugin.makeSource(c, context: context).run(output: collector.output) }
        defer { task.cancel() }
        // Appended until the source, which opens the file at its end, has seen two epochs.
        let next = Mutex(1)
        let arrived = await Poll.until(interval: .milliseconds(50)) {
            try? append(NMEASamples.epoch(next.withLock { $0 += 1; return $0 }), to: path)
            return collector.count >= 2
        }
        #expect(arrived)
        let p = try #require(collector.positions.first)
        #expect(p.source == "under_test")
        #expect(p.device == "boat")
        #expect(p.id.hasPrefix("under_test-"))
    }

    @Test func conformance() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/r.nmea"
        let c = try PluginOptions.valid(LineTailPlugin.self, #"{ "path": "\#(path)", "poll_interval": "20ms", "from_start": true }"#)
        let make = { (ctx: ComponentContext) throws -> any PositionSource in try LineTailPlugin.makeSource(c, context: ctx) }

        // The file does not exist yet: the source keeps retrying, and cancellation still ends it.
        try await SourceConformance.checkCancellation(make: make)

        try append("", to: path)
        try await SourceConformance.checkBadInputCounted(counters: ["nmea.rejected", "nmea.noise_bytes"],
            feedGarbage: { try append("$GPGGA,garbage*00\r\n\u{1}\u{2}junk\r\n", to: path) }, make: make)

        // The "peer going away" of a file: it is deleted, then written anew.
        try FileManager.default.removeItem(atPath: path)
        let writer = Mutex<Writer?>(Writer(path: path))
        try await SourceConformance.checkReconnects(
            peerDown: { writer.withLock { $0?.stop(); $0 = nil }; try? FileManager.default.removeItem(atPath: path) },
            peerUp: { writer.withLock { $0 = Writer(path: path) } },
            make: make)
        writer.withLock { $0?.stop() }
    }
}
