import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// The real and fake gpsd peers and processes the tests start: the one test file that talks to C.
enum Peers {
    /// A TCP port on 127.0.0.1 that was free a moment ago.
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        precondition(fd >= 0, "socket failed")
        defer { close(fd) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        precondition(bound == 0, "bind failed")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func loopback(port: Int) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return a
    }

    static var gpsfakeAvailable: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/gpsfake") && FileManager.default.isExecutableFile(atPath: "/usr/sbin/gpsd") }
}

/// A child process in its own process group, started with `posix_spawn` so that stopping it
/// can signal the whole group (gpsfake and the gpsd it starts) and nothing else.
final class ChildProcess {
    let pid: pid_t
    /// What the reaper thread learns: the exit status, and a group left once it is known.
    private final class Exit: Sendable {
        let status = Locked<Int32?>(nil)
        let group = DispatchGroup()
    }
    private let exit = Exit()

    init(_ path: String, _ arguments: [String], environment: [String: String], stdout: String = "/dev/null", stderr: String = "/dev/null") throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: path]) }
        pid = child
        // One thread blocks in waitpid for the child, so a wait is a wait on its exit, not a poll.
        let exit = self.exit, spawned = child
        exit.group.enter()
        Thread.detachNewThread {
            var raw: Int32 = 0
            while waitpid(spawned, &raw, 0) < 0 && errno == EINTR {}
            // WIFEXITED / WEXITSTATUS are macros; decode by hand.
            exit.status.withLock { $0 = (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F) }
            exit.group.leave()
        }
    }

    var isRunning: Bool { exit.status.withLock { $0 } == nil }

    /// Sends `signal` to the child's process group.
    func signalGroup(_ signal: Int32) { if isRunning { kill(-pid, signal) } }

    func signal(_ signal: Int32) { if isRunning { kill(pid, signal) } }

    /// Waits for the child to exit, up to `timeout`; its exit code, or nil.
    @discardableResult
    func wait(timeout: TimeInterval = 30) -> Int32? {
        _ = exit.group.wait(timeout: .now() + timeout)
        return exit.status.withLock { $0 }
    }

    deinit {
        if isRunning { kill(-pid, SIGKILL); wait(timeout: 5) }
    }
}

/// A real gpsd run by `gpsfake` on a free loopback port, replaying logs once.
final class GpsFake {
    let process: ChildProcess
    let port: Int
    let directory: URL

    /// Lines of a harmless sentence gpsd reports nothing for, fed before each log: gpsd flushes
    /// the pty when a client first watches, so without this head start the first epochs would be
    /// lost before the client's `?WATCH` arrives.
    /// 400 lines (4 s at the default cycle) leave room for a machine busy with other tests.
    static let paddingLines = 400

    /// Starts gpsfake serving `logs` (fixture names; several logs make several devices), one line every `cycle` seconds.
    /// `once: false` replays the logs in a loop; `debug` passes gpsd a debug level (its client commands appear in ``log`` from 4 up).
    init(logs: [String], port: Int, cycle: Double = 0.01, once: Bool = true, debug: Int? = nil) throws {
        self.port = port
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("locgate-gpsfake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var paths: [String] = []
        let pad = Array(String(repeating: "$GPTXT,01,01,02,locgate test padding*5D\r\n", count: Self.paddingLines).utf8)
        for log in logs {
            let url = directory.appendingPathComponent(log)
            try Data(pad + TestSupport.fixture(log)).write(to: url)
            paths.append(url.path)
        }
        var environment = ProcessInfo.processInfo.environment
        // gpsfake starts `gpsd` from PATH; Debian installs it in /usr/sbin.
        environment["PATH"] = "/usr/sbin:/usr/bin:/bin"
        environment["TMPDIR"] = directory.path
        process = try ChildProcess(
            "/usr/bin/gpsfake", ["-q"] + (once ? ["-1"] : []) + (debug.map { ["-D", String($0)] } ?? []) + ["-P", String(port), "-c", String(cycle)] + paths,
            environment: environment, stderr: directory.appendingPathComponent("gpsfake.log").path)
    }

    /// What gpsfake and its gpsd wrote to stderr.
    var log: String { (try? String(contentsOf: directory.appendingPathComponent("gpsfake.log"), encoding: .utf8)) ?? "" }

    /// Stops gpsfake and its gpsd with SIGKILL (gpsfake does not exit on SIGTERM while it waits
    /// for its daemon) and waits for gpsfake to exit.
    func stop() {
        process.signalGroup(SIGKILL)
        process.wait()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A scripted TCP peer that speaks like gpsd: accepts connections and sends given bytes.
final class FakeGpsd: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let state = State()
    private let thread: Thread

    private final class State: @unchecked Sendable {
        let lock = NSLock()
        var connections = 0
        var received: [UInt8] = []
        func accepted() { lock.lock(); connections += 1; lock.unlock() }
        func record(_ bytes: [UInt8]) { lock.lock(); received += bytes; lock.unlock() }
    }

    /// What each accepted connection is sent; the connection then stays open, silent, until the next accept.
    init(closeAfterSend: Bool = false, script: @escaping @Sendable (Int) -> [UInt8]) {
        let fd: Int32 = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = Peers.loopback(port: 0)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
        listen(fd, 8)
        listener = fd
        let box = state
        thread = Thread {
            var open: [Int32] = []
            var n = 0
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 { break }
                n += 1
                box.accepted()
                // Read the ?WATCH (up to its newline) so tests can check it. The client sends it
                // right after connecting, but a loaded machine can take a while: wait up to 5 s.
                var tv = timeval(tv_sec: 0, tv_usec: 250_000)
                setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                var buffer = [UInt8](repeating: 0, count: 512)
                var got: [UInt8] = []
                for _ in 0..<20 where !got.contains(10) {
                    let r = buffer.withUnsafeMutableBytes { recv(c, $0.baseAddress, $0.count, 0) }
                    if r > 0 { got += buffer[0..<r] } else if r == 0 { break }
                }
                if !got.isEmpty { box.record(got) }
                let bytes = script(n)
                var sent = 0
                while sent < bytes.count {
                    let w = bytes.withUnsafeBytes { send(c, $0.baseAddress.map { $0 + sent }, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
                    if w <= 0 { break }
                    sent += w
                }
                // Earlier connections are closed: the client has given up on them.
                for o in open { close(o) }
                open = []
                if closeAfterSend { close(c) } else { open = [c] }
            }
            for o in open { close(o) }
        }
        thread.start()
    }

    var connections: Int { state.lock.lock(); defer { state.lock.unlock() }; return state.connections }
    var received: String { state.lock.lock(); defer { state.lock.unlock() }; return String(decoding: state.received, as: UTF8.self) }

    /// Stops accepting (the accept call fails once the listener is shut down).
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}
