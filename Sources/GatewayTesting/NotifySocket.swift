import Foundation
import Locking
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What systemd listens on for `sd_notify`: an AF_UNIX datagram socket. A test passes ``path`` as
/// `NOTIFY_SOCKET` to a child and reads what it sent (`READY=1`, `WATCHDOG=1`, `STATUS=…`).
public final class NotifySocket: Sendable {
    /// One datagram: one or more `KEY=VALUE` lines sent together.
    public struct Datagram: Sendable {
        public var text: String
        /// When it arrived, on the continuous clock.
        public var at: ContinuousClock.Instant
        public var lines: [String] { text.split(separator: "\n").map(String.init) }
        /// The value of `KEY=` in this datagram, if present.
        public func value(_ key: String) -> String? {
            lines.first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
        }
    }

    public let path: String
    private let fd: Int32
    private let received = Locked<[Datagram]>([])
    private let stopped = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    /// Binds a socket in the temporary directory and starts reading it on a thread of its own.
    public init() throws {
        // sun_path holds 108 bytes: a short name in /tmp, not the (long) test directory.
        path = "/tmp/locgate-notify-\(UUID().uuidString.prefix(8)).sock"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NotifySocketError(message: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buf in
            for (i, b) in path.utf8.enumerated() where i < buf.count - 1 { buf[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw NotifySocketError(message: "bind \(path): \(message)")
        }
        let thread = Thread { [self] in readLoop() }
        thread.start()
    }

    deinit {
        stopped.store(true, ordering: .relaxed)
        done.wait()
        close(fd)
        unlink(path)
    }

    /// Every datagram received so far, oldest first.
    public var datagrams: [Datagram] { received.withLock { $0 } }

    /// Datagrams containing the line `line` (such as `WATCHDOG=1`).
    public func datagrams(containing line: String) -> [Datagram] {
        datagrams.filter { $0.lines.contains(line) }
    }

    private func readLoop() {
        defer { done.signal() }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopped.load(ordering: .relaxed) {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            // A short poll so deinit is never kept waiting long.
            guard poll(&p, 1, 50) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { continue }
            let datagram = Datagram(text: String(decoding: buffer[0..<n], as: UTF8.self), at: ContinuousClock.now)
            received.withLock { $0.append(datagram) }
        }
    }
}

public struct NotifySocketError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
