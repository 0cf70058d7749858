// The one file of the test kit that talks to the C library (loopback sockets for test peers).
import Foundation
#if canImport(Glibc)
import Glibc
import Locking
#endif

/// A TCP server on 127.0.0.1 that sends scripted bytes to every client: the peer a network
/// source's tests connect to. ``stop()`` makes it disappear (clients see the connection close),
/// ``start()`` brings it back on the same port, so reconnection can be tested.
public final class LoopbackTCPServer: Sendable {
    /// The port it listens on (chosen by the kernel on first start unless given).
    public var port: Int { state.withLock { $0.port } }
    /// Connections accepted so far, over all starts.
    public var connections: Int { state.withLock { $0.accepted } }

    private struct State {
        var port: Int
        var listener: Int32 = -1
        var clients: [Int32] = []
        var accepted = 0
        var generation = 0
    }
    private let state: Locked<State>
    private let payload: @Sendable (Int) -> [UInt8]
    private let interval: Duration

    /// A server that sends `payload(n)` to every client every `interval` (n counts up from 0).
    public init(port: Int = 0, interval: Duration = .milliseconds(100), payload: @escaping @Sendable (Int) -> [UInt8]) {
        state = Locked(State(port: port))
        self.payload = payload
        self.interval = interval
    }

    deinit { stop() }

    /// Listens (again) and serves on a background thread until ``stop()``.
    public func start() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PeerError("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = LoopbackTCPServer.loopback(port: state.withLock { $0.port })
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw PeerError("bind/listen")
        }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        let generation = state.withLock { s -> Int in
            s.listener = fd
            s.port = Int(UInt16(bigEndian: bound.sin_port))
            s.generation += 1
            return s.generation
        }
        let thread = Thread { [self] in serve(listener: fd, generation: generation) }
        thread.start()
    }

    /// Stops listening and ends every client connection (clients see the close at once).
    ///
    /// The descriptors are shut down here but closed by the serving thread when it notices the
    /// stop: closing them here would free their numbers while that thread may still poll or send
    /// on them, and a descriptor reused by the next server (or a client) would then have its
    /// connections accepted and closed, or its bytes written, by this one.
    public func stop() {
        let fds: [Int32] = state.withLock { s in
            let all = s.clients + (s.listener >= 0 ? [s.listener] : [])
            s.clients = []
            s.listener = -1
            s.generation += 1
            return all
        }
        for fd in fds { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func serve(listener: Int32, generation: Int) {
        var mine: [Int32] = []
        defer { for fd in mine + [listener] { close(fd) } }
        var n = 0
        let ms = Int32(clamping: interval.milliseconds)
        while state.withLock({ $0.generation == generation }) {
            var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, ms) > 0 && p.revents & Int16(POLLIN) != 0 {
                let c = accept(listener, nil, nil)
                if c >= 0 {
                    var one: Int32 = 1
                    setsockopt(c, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    let kept = state.withLock { s -> Bool in
                        guard s.generation == generation else { return false }
                        s.clients.append(c)
                        s.accepted += 1
                        return true
                    }
                    if kept { mine.append(c) } else { close(c) }
                }
            }
            let bytes = payload(n)
            n += 1
            let clients = state.withLock { $0.generation == generation ? $0.clients : [] }
            for c in clients {
                _ = bytes.withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }

    static func loopback(port: Int) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
        return a
    }

    /// A port on 127.0.0.1 that was free a moment ago (for sources that bind a port themselves).
    public static func freePort(udp: Bool = false) -> Int {
        let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = loopback(port: 0)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

/// A UDP socket on 127.0.0.1 that sends datagrams to a port: one "sender" for a UDP source's tests.
public final class LoopbackUDPSender: Sendable {
    private let fd: Int32
    /// The sender's own `127.0.0.1:port`, as a UDP source names it.
    public let address: String

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw PeerError("socket") }
        var addr = LoopbackTCPServer.loopback(port: 0)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        self.fd = fd
        address = "127.0.0.1:\(UInt16(bigEndian: addr.sin_port))"
    }

    deinit { close(fd) }

    /// The next datagram received within `timeout`, or nil.
    public func receive(timeout: Duration = .seconds(10)) -> [UInt8]? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(clamping: timeout.milliseconds)
        guard poll(&p, 1, ms) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n >= 0 ? Array(buffer[0..<n]) : nil
    }

    /// Sends one datagram to 127.0.0.1:`port`.
    public func send(_ bytes: [UInt8], to port: Int) {
        var to = LoopbackTCPServer.loopback(port: port)
        _ = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
    }
}

/// A TCP client on 127.0.0.1 that plays a device: sends bytes, reads answers with a deadline,
/// and tells when the server closed the connection.
public final class LoopbackTCPClient: @unchecked Sendable {
    // Unchecked Sendable: one test task uses a client at a time.
    private let fd: Int32
    private var closed = false

    /// Connects to 127.0.0.1:`port` (blocking: the server is on this machine).
    public init(port: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw PeerError("socket") }
        var addr = LoopbackTCPServer.loopback(port: port)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else {
            let error = PeerError("connect 127.0.0.1:\(port)")
            Glibc.close(fd)
            throw error
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        self.fd = fd
    }

    deinit { if !closed { Glibc.close(fd) } }

    /// Sends every byte (false when the connection is gone).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return Glibc.send(fd, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    /// Sends a text as UTF-8.
    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads until `count` bytes arrived, the server closed, or `timeout` passed; returns what
    /// arrived (fewer than `count` on a close or a timeout).
    public func read(count: Int, timeout: Duration = .seconds(10)) -> [UInt8] {
        var out: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while out.count < count {
            let left = deadline - ContinuousClock.now
            guard left > .zero, let chunk = readSome(timeout: left, max: count - out.count) else { break }
            if chunk.isEmpty { break }
            out += chunk
        }
        return out
    }

    /// Whatever arrives within `timeout` (empty when nothing did); nil once the server closed.
    public func readSome(timeout: Duration, max: Int = 65_536) -> [UInt8]? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(clamping: timeout.milliseconds)
        guard poll(&p, 1, ms) > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: max)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return Array(buffer[0..<n])
    }

    /// True when the server closed the connection within `timeout` (bytes that arrive meanwhile
    /// are read and dropped).
    public func waitForClose(timeout: Duration = .seconds(10)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard readSome(timeout: deadline - ContinuousClock.now) != nil else { return true }
        }
        return false
    }

    /// Closes the client's end.
    public func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }
}

/// A loopback peer could not be set up.
public struct PeerError: Error, CustomStringConvertible {
    public var description: String
    init(_ operation: String) { description = "\(operation): \(String(cString: strerror(errno)))" }
    public init(description: String) { self.description = description }
}

/// NMEA test data with valid checksums.
public enum NMEASamples {
    /// `$` + body + `*HH\r\n`.
    public static func sentence(_ body: String) -> String {
        var sum: UInt8 = 0
        for b in body.utf8 { sum ^= b }
        let hex = Array("0123456789ABCDEF")
        return "$\(body)*\(hex[Int(sum >> 4)])\(hex[Int(sum & 15)])\r\n"
    }

    /// One epoch (RMC + GGA) at 2026-03-01 12:mm:ss, `n` seconds after noon, near 52.5°N 13.4°E.
    public static func epoch(_ n: Int) -> String {
        let hh = 12 + (n / 3600) % 12, mm = (n / 60) % 60, ss = n % 60
        let t = String(format: "%02d%02d%02d.00", hh, mm, ss)
        let lat = String(format: "5231.%04d", 2000 + n % 1000)
        return sentence("GPRMC,\(t),A,\(lat),N,01324.0000,E,1.5,90.0,010326,,,A")
            + sentence("GPGGA,\(t),\(lat),N,01324.0000,E,1,09,0.9,34.0,M,40.0,M,,")
    }
}
