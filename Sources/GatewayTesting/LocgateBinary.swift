import Dispatch
import Foundation
import GatewayCore
import Synchronization

/// The built `locgate` binary and the package it belongs to, for tests that run it as a user
/// would (crash tests with kill -9, examples run end to end).
public enum LocgateBinary {
    /// The package root, found from this file's path (Sources/GatewayTesting/…).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `.build/debug/locgate`, built when missing.
    public static func path() throws -> String {
        let path = packageRoot.appendingPathComponent(".build/debug/locgate").path
        if !FileManager.default.isExecutableFile(atPath: path) {
            let build = Process()
            build.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            build.arguments = ["swift", "build", "--product", "locgate"]
            build.currentDirectoryURL = packageRoot
            try build.run()
            build.waitUntilExit()
        }
        return path
    }

    /// What a finished run of the binary printed.
    public typealias Result = Program.Result

    /// Starts the binary with `arguments` (without the binary itself), stdout and stderr on pipes
    /// the caller reads; the caller waits for or signals the process.
    public static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> (Process, Pipe, Pipe) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try path())
        p.arguments = arguments
        if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        return (p, out, err)
    }

    /// Runs the binary with `arguments` to completion and returns what it printed.
    public static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        try Program.run(try path(), arguments, environment: environment)
    }

    /// Starts `arguments[0]` with the rest as arguments, in the package root, stderr (and stdout
    /// if given, else discarded) written to files.
    public static func launch(_ arguments: [String], stderr: String, stdout: String? = nil, environment: [String: String] = [:]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: arguments[0])
        p.arguments = Array(arguments.dropFirst())
        p.currentDirectoryURL = packageRoot
        if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        _ = FileManager.default.createFile(atPath: stderr, contents: nil)
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderr))
        if let stdout {
            _ = FileManager.default.createFile(atPath: stdout, contents: nil)
            p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdout))
        } else {
            p.standardOutput = FileHandle.nullDevice
        }
        try p.run()
        return p
    }
}

extension NMEASamples {
    /// `epochs` one-second epochs of RMC + GGA with correct checksums, from 2024-05-01 00:00:00 UTC,
    /// moving a little every epoch (ids are the fix times, so every epoch is a distinct position).
    public static func writeLog(epochs: Int, to path: String) throws {
        func pad(_ v: Int, _ n: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, n - s.count)) + s }
        var text = ""
        text.reserveCapacity(epochs * 140)
        for i in 0..<epochs {
            let t = Timestamp(milliseconds: 1_714_521_600_000 + Int64(i) * 1000).components
            let time = "\(pad(t.hour, 2))\(pad(t.minute, 2))\(pad(t.second, 2)).00"
            let date = "\(pad(t.day, 2))\(pad(t.month, 2))\(pad(t.year % 100, 2))"
            let lat = "31\(pad(10 + i % 40, 2)).\(pad(i % 10000, 4))"
            let lon = "121\(pad(20 + i % 30, 2)).\(pad((i * 7) % 10000, 4))"
            text += sentence("GPRMC,\(time),A,\(lat),N,\(lon),E,3.2,87.5,\(date),,,A")
            text += sentence("GPGGA,\(time),\(lat),N,\(lon),E,1,09,0.9,15.2,M,7.1,M,,")
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}
