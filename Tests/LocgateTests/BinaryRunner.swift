import Foundation
import GatewayTesting

/// Runs the built `locgate` binary (GatewayTesting's `LocgateBinary`), as a user would, with its
/// output captured.
enum BinaryRunner {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// GatewayTesting's `LocgateBinary` (built when missing).
    static let binary: URL = URL(fileURLWithPath: (try? LocgateBinary.path()) ?? packageRoot.appendingPathComponent(".build/debug/locgate").path)

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Starts the binary; the caller waits or signals it.
    static func start(_ args: [String], environment: [String: String] = [:]) throws -> (Process, Pipe, Pipe) {
        let p = Process()
        p.executableURL = binary
        p.arguments = args
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        return (p, out, err)
    }

    static func run(_ args: [String], environment: [String: String] = [:]) throws -> Result {
        let (p, out, err) = try start(args, environment: environment)
        // Read before waiting so a full pipe cannot block the child.
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }

    static func fixture(_ name: String) -> URL {
        packageRoot.appendingPathComponent("Tests/NMEATests/Fixtures/gpsd/\(name)")
    }

    static func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("locgate-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }
}
