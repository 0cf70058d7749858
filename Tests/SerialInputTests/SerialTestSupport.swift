import Foundation
import GatewayTesting
import NMEA
#if canImport(Glibc)
import Glibc
#endif

/// Paths of the package, found from this file's location.
enum PackagePaths {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }  // Support file → SerialInputTests → Tests → root
        return url.path
    }()

    /// The built `locgate`, built here if the README's test command did not build it first.
    static let locgate: String = {
        let path = root + "/.build/debug/locgate"
        if !FileManager.default.isExecutableFile(atPath: path) {
            _ = try? Shell.run("/usr/bin/env", ["swift", "build", "--product", "locgate"], in: root)
        }
        return path
    }()

    /// The LD_PRELOAD library that lets libserialport 0.1.1 open ptys, compiled once per test process.
    static let ptyShim: String = {
        let out = NSTemporaryDirectory() + "locgate-ptyshim-\(getpid()).so"
        let source = root + "/Tests/SerialInputTests/Support/ptyshim.c"
        _ = try? Shell.run("/usr/bin/env", ["cc", "-shared", "-fPIC", "-O2", "-o", out, source, "-ldl"], in: root)
        return out
    }()
}

enum Shell {
    /// Runs a command to completion; returns its exit status.
    @discardableResult
    static func run(_ tool: String, _ args: [String], in dir: String) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// A scratch directory removed at the end of a test.
final class ScratchDirectory {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "locgate-serial-\(getpid())-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A socat pty pair: the test writes into `writer`, locgate reads `reader`.
final class PtyPair {
    let writer: String
    let reader: String
    private var process: Process?
    private var fd: Int32 = -1

    init(directory: String) {
        writer = directory + "/receiver"
        reader = directory + "/ttyGNSS"
    }

    /// Starts socat (plug in) and waits for both links.
    func start() async throws {
        unlink(writer)
        unlink(reader)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/socat")
        p.arguments = ["-d", "-d", "pty,raw,echo=0,link=\(writer)", "pty,raw,echo=0,link=\(reader)"]
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let ok = await Poll.until(timeout: .seconds(10)) { access(writer, F_OK) == 0 && access(reader, F_OK) == 0 }
        guard ok else { throw TestFailure("socat did not create \(writer) and \(reader)") }
        fd = open(writer, O_RDWR | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { throw TestFailure("cannot open \(writer): \(String(cString: strerror(errno)))") }
    }

    /// Writes bytes into the receiver's end, as a receiver would.
    func write(_ bytes: [UInt8]) {
        var offset = 0
        var waits = 0
        // Bounded: if nobody reads the other end the pty fills up, and a test must fail, not hang.
        while offset < bytes.count && waits < 500 {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                offset += n
            } else if errno == EAGAIN || errno == EINTR {
                // Full: wait until the pty has room again.
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&p, 1, 10)
                waits += 1
            } else {
                return
            }
        }
    }

    /// What locgate wrote to the receiver so far (init lines), without waiting.
    func readAvailable() -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return out }
            out += buffer[0..<n]
        }
    }

    /// Kills socat (unplug): the reader end hangs up at once, as a USB tty does when pulled.
    ///
    /// SIGKILL, not SIGTERM: socat started from the test runner did not end on SIGTERM
    /// (a signal disposition inherited from the runner), and an unplug is abrupt anyway.
    func stop() {
        if fd >= 0 { close(fd); fd = -1 }
        guard let p = process, p.isRunning else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
        unlink(writer)
        unlink(reader)
    }

    deinit { stop() }
}

/// A `locgate run` child with the pty shim preloaded; stderr is kept in a file.
final class LocgateProcess {
    let process = Process()
    let logPath: String

    init(config: String, directory: String, preload: Bool = true) throws {
        let configPath = directory + "/pipeline.json"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        logPath = directory + "/locgate.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: PackagePaths.locgate)
        process.arguments = ["run", configPath, "--log-level", "debug"]
        var env = ProcessInfo.processInfo.environment
        if preload { env["LD_PRELOAD"] = PackagePaths.ptyShim }
        process.environment = env
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// How many log lines contain `text`.
    func count(_ text: String) -> Int { log.components(separatedBy: "\n").filter { $0.contains(text) }.count }

    /// User and system CPU time so far, from /proc/<pid>/stat, in seconds.
    var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return 0 }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// SIGINT (graceful shutdown) and wait.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Synthetic receiver output: one RMC + GGA pair per epoch, 10 Hz, latitude growing with the index.
enum NMEAGenerator {
    /// The bytes of epoch `i` (0.1 s apart from 12:00:00.0 on 2026-11-30).
    static func epoch(_ i: Int) -> [UInt8] {
        let tenths = i % 10, seconds = 43_200 + i / 10
        let time = String(format: "%02d%02d%02d.%d0", seconds / 3600, seconds / 60 % 60, seconds % 60, tenths)
        let lat = String(format: "4807.%06d", i)  // minutes grow by 1e-6 per epoch
        let rmc = NMEAChecksum.sentence(body: "GPRMC,\(time),A,\(lat),N,01131.000000,E,0.5,54.7,301126,,,A")
        let gga = NMEAChecksum.sentence(body: "GPGGA,\(time),\(lat),N,01131.000000,E,1,08,0.9,545.4,M,46.9,M,,")
        return Array((rmc + gga).utf8)
    }

    /// The latitude epoch `i` decodes to.
    static func latitude(_ i: Int) -> Double { 48 + (7 + Double(i) * 1e-6) / 60 }
}

/// Positions in a JSON Lines output file, as (time, lat) pairs.
func readPositions(_ path: String) -> [(time: String, lat: Double)] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
    return text.split(separator: "\n").compactMap { line in
        guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let t = obj["time"] as? String, let lat = obj["lat"] as? Double else { return nil }
        return (t, lat)
    }
}

/// A serial → file pipeline config for a pty.
func serialConfig(port: String, output: String, stallTimeout: String = "5s", extra: String = "") -> String {
    """
    {
      "settings": { "stats_interval": "1s" },
      "sources": { "rx": { "type": "serial", "port": "\(port)", "baud": 9600, "stall_timeout": "\(stallTimeout)", "backoff_cap": "1s"\(extra.isEmpty ? "" : ", " + extra) } },
      "sinks": { "out": { "type": "file", "inputs": ["rx"], "path": "\(output)" } }
    }
    """
}

/// When the first log line containing `text` was written, in seconds since 1970, from its
/// `2026-11-30T06:40:00.123Z` prefix.
func logTime(_ log: String, _ text: String) -> Double? {
    guard let line = log.split(separator: "\n").first(where: { $0.contains(text) }) else { return nil }
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: String(line.prefix { $0 != " " }))?.timeIntervalSince1970
}
