import Foundation
import GatewayCore
import GatewayTesting
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// A small NTRIP caster for the tests, on loopback and a free port: each connection's request
/// head is recorded and handed to the test's script with the connection, and every line the
/// client sends after it (GGA) is recorded with the time of `clock` when it arrived.
final class TestCaster: @unchecked Sendable {
    /// One client connection, as the script sees it.
    final class Connection: @unchecked Sendable {
        let fd: Int32
        let index: Int
        let request: String
        init(fd: Int32, index: Int, request: String) {
            self.fd = fd
            self.index = index
            self.request = request
        }

        /// Sends all of `bytes` (false once the client is gone).
        @discardableResult
        func send(_ bytes: [UInt8]) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { return false }
                sent += n
            }
            return true
        }

        @discardableResult
        func send(_ text: String) -> Bool { send(Array(text.utf8)) }

        /// Closes the connection from the caster's side.
        func close() { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    struct Line: Sendable {
        var connection: Int
        var at: Timestamp
        var text: String
    }

    struct State {
        var requests: [String] = []
        var lines: [Line] = []
        var connections = 0
        var stopped = false
        var listenerClosed = false
        var fds: [Int32] = []
    }

    let port: Int
    private let listenFD: Int32
    private let clock: any GatewayClock
    private let script: @Sendable (Connection) -> Void
    let state = Locked(State())

    init(clock: any GatewayClock, script: @escaping @Sendable (Connection) -> Void) throws {
        self.clock = clock
        self.script = script
        let listenFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.listenFD = listenFD
        var one: Int32 = 1
        setsockopt(listenFD, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listenFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(listenFD, 8) == 0 else { throw PeerError(description: "test caster: bind/listen failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listenFD, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Starts accepting.
    func start() -> TestCaster {
        Thread.detachNewThread { [self] in acceptLoop() }
        return self
    }

    // Descriptors are closed only by the thread that serves them, once its script and its line
    // reader are both done, and the listener only by the accept thread: a number closed while
    // another thread may still call accept/send/recv on it can be reused by the next test's
    // sockets (a caster was seen taking another test's connection).
    private func acceptLoop() {
        while true {
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else {
                state.withLock { s in
                    s.listenerClosed = true
                    Glibc.close(listenFD)
                }
                return
            }
            let index = state.withLock { s -> Int in s.connections += 1; s.fds.append(fd); return s.connections }
            Thread.detachNewThread { [self] in
                serve(fd, index: index)
                state.withLock { $0.fds.removeAll { $0 == fd } }
                Glibc.close(fd)
            }
        }
    }

    private func serve(_ fd: Int32, index: Int) {
        // The request head, up to the blank line.
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !(head.count >= 4 && head.suffix(4) == [13, 10, 13, 10]) {
            guard recv(fd, &byte, 1, 0) == 1 else { return }
            head.append(byte)
        }
        let request = String(decoding: head, as: UTF8.self)
        state.withLock { $0.requests.append(request) }
        let connection = Connection(fd: fd, index: index, request: request)
        // What the client sends from now on, line by line, until it closes (or stop()).
        let readerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            var line: [UInt8] = []
            var b: UInt8 = 0
            while recv(fd, &b, 1, 0) == 1 {
                line.append(b)
                if b == 10 {
                    let text = String(decoding: line, as: UTF8.self)
                    let now = clock.now()
                    state.withLock { $0.lines.append(Line(connection: index, at: now, text: text)) }
                    line.removeAll()
                }
            }
            readerDone.signal()
        }
        script(connection)
        readerDone.wait()
    }

    var requests: [String] { state.withLock { $0.requests } }
    var lines: [Line] { state.withLock { $0.lines } }
    var connections: Int { state.withLock { $0.connections } }

    func stop() {
        // Under the lock: a serving thread removes its descriptor before closing it, so every
        // number shut down here is still this caster's.
        state.withLock { s in
            guard !s.stopped else { return }
            s.stopped = true
            if !s.listenerClosed { shutdown(listenFD, Int32(SHUT_RDWR)) }
            for fd in s.fds { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    deinit { stop() }
}
