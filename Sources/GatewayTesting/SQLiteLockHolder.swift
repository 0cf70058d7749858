import Foundation
import Locking

/// `sqlite3` (the command-line shell) holding `BEGIN IMMEDIATE` on a database until ``finish()``.
public final class SQLiteLockHolder: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let finished = Locked(false)

    public init(path: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", path]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data("BEGIN IMMEDIATE;\nSELECT 'locked';\n".utf8))
        // The shell answers once the lock is held.
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("locked") {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw LockError() }
            seen.append(chunk)
        }
    }

    public func finish() {
        guard !finished.withLock({ let was = $0; $0 = true; return was }) else { return }
        input.fileHandleForWriting.write(Data("COMMIT;\n.quit\n".utf8))
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    public struct LockError: Error {}
}
