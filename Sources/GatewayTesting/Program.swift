import Dispatch
import Foundation
import Locking

/// A program a test runs to its end: the locgate binary, make, curl, a broker's tools.
public enum Program {
    /// What a finished run printed, and how it ended.
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        /// Standard output, then standard error: for messages and for "printed nothing" checks.
        public var output: String { stdout + stderr }
    }

    /// Runs `executable` (a path; `/usr/bin/env` to look a name up in PATH) with `arguments`
    /// until it exits, in `directory` if given, with `environment` added to this process's.
    ///
    /// Both pipes are drained at once, so neither can fill and block the child.
    public static func run(_ executable: String, _ arguments: [String], in directory: URL? = nil,
                           environment: [String: String] = [:]) throws -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        if let directory { p.currentDirectoryURL = directory }
        if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let stderrData = Locked(Data())
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            let d = err.fileHandleForReading.readDataToEndOfFile()
            stderrData.withLock { $0 = d }
        }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
                      stderr: String(decoding: stderrData.withLock { $0 }, as: UTF8.self))
    }

    /// Runs `body` — a process wait, a blocking tool — on a Dispatch thread, so the test's async
    /// code waits for it without holding a thread of the cooperative pool.
    public static func onDispatchThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Swift.Result { try body() }) }
        }
    }
}
