// The one file of this plugin that talks to the C library (sockets, poll, getaddrinfo).
import Dispatch
import PollWakeup
#if canImport(Glibc)
import Glibc
#endif

/// A socket or system call that failed, with errno's text.
struct SocketError: Error, CustomStringConvertible {
    var operation: String
    var message: String
    var description: String { "\(operation): \(message)" }

    static func errno(_ operation: String) -> SocketError {
        SocketError(operation: operation, message: String(cString: strerror(Glibc.errno)))
    }
}

/// What a read returned.
enum ReadResult {
    case bytes(Int)
    /// Nothing available right now (a spurious wakeup).
    case wouldBlock
    case end
}

/// An open socket; closed in deinit.
final class SocketHandle: @unchecked Sendable {
    // @unchecked: the fd is set once and used by one task at a time (the source's run loop).
    let fd: Int32

    init(fd: Int32) { self.fd = fd }
    deinit { close(fd) }

    /// Reads into `buffer` without blocking.
    func read(into buffer: inout [UInt8]) throws(SocketError) -> ReadResult {
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 { return .bytes(n) }
            if n == 0 { return .end }
            if Glibc.errno == EINTR { continue }
            if Glibc.errno == EAGAIN || Glibc.errno == EWOULDBLOCK { return .wouldBlock }
            throw .errno("read")
        }
    }

    /// Receives one datagram without blocking; nil when none is waiting.
    func receive(into buffer: inout [UInt8]) throws(SocketError) -> (count: Int, sender: String)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let n = buffer.withUnsafeMutableBytes { b in
                withUnsafeMutablePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, b.baseAddress, b.count, 0, $0, &length) }
                }
            }
            if n >= 0 {
                let sender = withUnsafePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketHandle.describe($0, length) }
                }
                return (n, sender)
            }
            if Glibc.errno == EINTR { continue }
            if Glibc.errno == EAGAIN || Glibc.errno == EWOULDBLOCK { return nil }
            throw .errno("recvfrom")
        }
    }

    /// `1.2.3.4:5` or `[::1]:5`.
    static func describe(_ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        guard getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                          NI_NUMERICHOST | NI_NUMERICSERV) == 0 else { return "unknown" }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let s = String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return h.contains(":") ? "[\(h)]:\(s)" : "\(h):\(s)"
    }

    /// Resolves `host`:`port` (numeric or a name) on a Dispatch thread: name lookups block.
    static func resolve(_ host: String, port: Int, socketType: Int32, passive: Bool) async throws(SocketError) -> [(family: Int32, address: [UInt8])] {
        let result: Result<[(family: Int32, address: [UInt8])], SocketError> = await withCheckedContinuation { c in
            DispatchQueue.global().async {
                var hints = addrinfo()
                hints.ai_family = AF_UNSPEC
                hints.ai_socktype = socketType
                if passive { hints.ai_flags = AI_PASSIVE }
                var list: UnsafeMutablePointer<addrinfo>?
                let rc = getaddrinfo(host.isEmpty ? nil : host, String(port), &hints, &list)
                guard rc == 0, let first = list else {
                    c.resume(returning: .failure(SocketError(operation: "resolve \(host)", message: String(cString: gai_strerror(rc)))))
                    return
                }
                defer { freeaddrinfo(first) }
                var out: [(Int32, [UInt8])] = []
                var p: UnsafeMutablePointer<addrinfo>? = first
                while let a = p {
                    if let addr = a.pointee.ai_addr {
                        out.append((a.pointee.ai_family, Array(UnsafeRawBufferPointer(start: addr, count: Int(a.pointee.ai_addrlen)))))
                    }
                    p = a.pointee.ai_next
                }
                c.resume(returning: .success(out))
            }
        }
        return try result.get()
    }

    private static func makeSocket(family: Int32, type: Int32) throws(SocketError) -> SocketHandle {
        let fd = socket(family, type | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .errno("socket") }
        return SocketHandle(fd: fd)
    }

    /// Connects a TCP client, trying each address of `host`, each within `timeout`.
    static func connect(host: String, port: Int, timeout: Duration, wakeup: Wakeup) async throws -> SocketHandle {
        var lastError = SocketError(operation: "connect \(host):\(port)", message: "no address")
        for (family, address) in try await resolve(host, port: port, socketType: Int32(SOCK_STREAM.rawValue), passive: false) {
            try Task.checkCancellation()
            let s = try makeSocket(family: family, type: Int32(SOCK_STREAM.rawValue))
            let rc = address.withUnsafeBytes { Glibc.connect(s.fd, $0.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
            if rc != 0 && Glibc.errno != EINPROGRESS {
                lastError = .errno("connect \(host):\(port)")
                continue
            }
            if rc != 0 {
                let ready = await wakeup.wait([s.fd], events: Int16(POLLOUT), timeout: timeout)
                try Task.checkCancellation()
                guard !ready.isEmpty else {
                    lastError = SocketError(operation: "connect \(host):\(port)", message: "timed out after \(timeout)")
                    continue
                }
                var err: Int32 = 0
                var len = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len)
                if err != 0 {
                    lastError = SocketError(operation: "connect \(host):\(port)", message: String(cString: strerror(err)))
                    continue
                }
            }
            return s
        }
        throw lastError
    }

    /// Binds a UDP socket to `host`:`port`.
    static func bindUDP(host: String, port: Int) async throws(SocketError) -> SocketHandle {
        var lastError = SocketError(operation: "bind \(host):\(port)", message: "no address")
        for (family, address) in try await resolve(host, port: port, socketType: Int32(SOCK_DGRAM.rawValue), passive: true) {
            let s = try makeSocket(family: family, type: Int32(SOCK_DGRAM.rawValue))
            var one: Int32 = 1
            setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            let rc = address.withUnsafeBytes { Glibc.bind(s.fd, $0.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
            if rc == 0 { return s }
            lastError = .errno("bind \(host):\(port)")
        }
        throw lastError
    }
}
