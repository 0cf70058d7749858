import Foundation
import GatewayTesting
import Testing

/// `locgate run` on one pipeline, killed -9 at seeded moments and started again: the crash loop
/// the devices-that-call-in tests put a fleet of simulated trackers through.
final class KilledRuns {
    let pipeline: String
    let directory: String
    private(set) var process: Process
    /// How many times locgate was started.
    private(set) var runs = 1

    /// Starts the first run of `pipeline` (its stderr in `<directory>/stderr-1.log`).
    init(pipeline: String, directory: String) throws {
        self.pipeline = pipeline
        self.directory = directory
        process = try Self.launch(pipeline, log: "\(directory)/stderr-1.log")
    }

    deinit { if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) } }

    private static func launch(_ pipeline: String, log: String) throws -> Process {
        try LocgateBinary.launch([try LocgateBinary.path(), "run", pipeline], stderr: log)
    }

    /// What the first run wrote to stderr.
    var firstLog: String { (try? String(contentsOfFile: "\(directory)/stderr-1.log", encoding: .utf8)) ?? "" }

    /// Waits until the first run logged `line` (a source listening).
    func started(saying line: String) async -> Bool {
        await Poll.until { [self] in firstLog.contains(line) }
    }

    /// `times` times: waits a seeded while in `milliseconds`, kills locgate with SIGKILL, starts it again.
    func kill(times: Int, seed: UInt64, milliseconds: ClosedRange<Int>) async throws {
        var rng = SeededGenerator(seed: seed)
        for _ in 0..<times {
            try await Task.sleep(for: .milliseconds(Int.random(in: milliseconds, using: &rng)))
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            runs += 1
            process = try Self.launch(pipeline, log: "\(directory)/stderr-\(runs).log")
        }
    }

    /// Stops the current run with SIGINT and waits for it.
    func stop() {
        Foundation.kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
    }
}
