import Foundation
import GatewayCore
import GatewayTesting
import GpsdInput
import Synchronization

/// Fixtures, gpsd's expected epochs, and a way to run a source and collect what it emits.
enum TestSupport {
    /// gpsd 3.22's outputs (this target's fixtures): the logs themselves are the NMEA engine's
    /// copy of gpsd's regression logs, read from there (one copy in the repository).
    static var fixtures: URL { Bundle.module.resourceURL!.appendingPathComponent("Fixtures/gpsd") }
    static var logs: URL { packageRoot.appendingPathComponent("Tests/NMEATests/Fixtures/gpsd") }

    /// One of gpsd's regression logs.
    static func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: logs.appendingPathComponent(name)))
    }

    /// gpsd 3.22's output (Debian's version) for a log.
    static func chk(_ log: String) throws -> [UInt8] {
        Array(try Data(contentsOf: fixtures.appendingPathComponent("chk-release-3.22/\(log).chk")))
    }

    /// Every log with a gpsd 3.22 `.chk`, sorted.
    static var chkLogs: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: fixtures.appendingPathComponent("chk-release-3.22").path)) ?? []
        return names.filter { $0.hasSuffix(".log.chk") }.map { String($0.dropLast(4)) }.sorted()
    }

    /// The package root, from this file's path.
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func context(_ id: String = "gps", logs: RecordingLogHandler = RecordingLogHandler(minimumLevel: .debug)) -> ComponentContext {
        ComponentContext(id: id, kind: .source, logger: Logger(label: "sources.\(id)", handler: logs), stats: ComponentStats(id: id))
    }

    static func configuration(port: Int, _ edit: (inout GpsdSourceConfiguration) -> Void = { _ in }) -> GpsdSourceConfiguration {
        var c = GpsdSourceConfiguration()
        c.port = port
        c.reconnectMax = .milliseconds(100)
        c.stallTimeout = .seconds(20)
        edit(&c)
        return c
    }

    /// Runs `source` while `body` runs, then cancels it; returns what `body` returns.
    @discardableResult
    static func running<T: Sendable>(
        _ source: GpsdPositionSource, into collector: PositionCollector, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run(output: collector.output) }
            defer { group.cancelAll() }
            return try await body()
        }
    }
}

/// The shared comparison rules (GatewayTesting's GpsdCheckFile), as problem lines.
enum GpsdChk {
    static func jsonLines(_ chk: [UInt8]) -> [[UInt8]] { GpsdCheckFile.jsonLines(chk) }
    static func epochs(chk: [UInt8]) -> [GpsdEpoch] { GpsdCheckFile.epochs(chk: chk) }
    static func problems(ours: [Position], gpsd: [GpsdEpoch], strictPresence: Bool = true) -> [String] {
        GpsdCheckFile.compare(ours: ours, gpsd: gpsd, strictPresence: strictPresence).problems(order: gpsd)
    }
}
