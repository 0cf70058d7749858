// The one file of the package that talks to the socket C API (socket, connect, bind, send, recv,
// getaddrinfo, getnameinfo). Every failure becomes a `SystemError` with errno's text.
import GatewayCore
#if canImport(Glibc)
import Glibc
#endif

/// An open non-blocking, close-on-exec socket; closed in deinit.
///
/// Every wait goes through the caller's ``Wakeup``, so a cancelled task stops waiting at once.
/// Waiting methods throw `CancellationError` when the task is cancelled and ``SystemError``
/// otherwise.
public final class Socket: @unchecked Sendable {
    // @unchecked: the fd never changes, and a socket is used by one task at a time (its source's run loop).
    /// The descriptor, for ``Wakeup/wait(_:events:timeout:)`` next to other descriptors.
    public let fd: Int32
    /// Handed over by ``detach()``: someone else closes it.
    private var detached = false

    private init(fd: Int32) { self.fd = fd }
    deinit { if !detached { close(fd) } }

    /// The descriptor, now the caller's to close.
    private func detach() -> Int32 {
        detached = true
        return fd
    }

    /// What a read returned.
    public enum ReadResult: Sendable, Equatable {
        case bytes(Int)
        /// Nothing to read: the wait timed out, or the wakeup was spurious.
        case nothing
        /// The peer closed the connection.
        case end
    }

    /// Which kind of socket an address is resolved for.
    public enum Kind: Sendable {
        case stream, datagram

        var type: Int32 { self == .stream ? Int32(SOCK_STREAM.rawValue) : Int32(SOCK_DGRAM.rawValue) }
    }

    /// Holds back (true) or lets go (false) partly filled TCP segments on a socket another library
    /// owns (libmosquitto's): `TCP_CORK`, so a burst of small writes leaves as a few full segments
    /// when let go, instead of one segment each. Errors are ignored (not TCP: nothing to gain).
    public static func setCorked(_ fd: Int32, _ corked: Bool) {
        var value: Int32 = corked ? 1 : 0
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_CORK, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Acknowledges received data at once instead of after the delayed-ACK timer (`TCP_QUICKACK`),
    /// on a socket another library owns. Linux leaves quick-ack mode on its own, so this is
    /// called again after each read. Errors are ignored.
    public static func acknowledgeQuickly(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_QUICKACK, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    // MARK: - Opening

    /// Connects a TCP client to `host`:`port`, trying every address the name resolves to, each
    /// within `timeout`; the error is the last address's.
    public static func connect(host: String, port: Int, timeout: Duration, wakeup: Wakeup) async throws -> Socket {
        let what = "connect \(endpoint(host, port))"
        var lastError = SystemError(operation: what, message: "no address")
        for address in try await resolve(host, port: port, kind: .stream, passive: false) {
            try Task.checkCancellation()
            let s = try open(family: address.family, kind: .stream)
            switch s.startConnect(to: address, what) {
            case .connected: return s
            case .failed(let e): lastError = e; continue
            case .pending: break
            }
            let ready = await wakeup.wait([s.fd], events: Int16(POLLOUT), timeout: timeout)
            try Task.checkCancellation()
            guard !ready.isEmpty else {
                lastError = .timedOut(what, after: timeout)
                continue
            }
            if let e = s.connectOutcome(what) { lastError = e } else { return s }
        }
        throw lastError
    }

    /// ``connect(host:port:timeout:wakeup:)`` on the calling thread, blocking it (resolution
    /// included) and not cancellable: for checks that run on threads of their own, such as
    /// `locgate validate`'s peer checks — never for a source's run loop.
    public static func connectBlocking(host: String, port: Int, timeout: Duration) throws(SystemError) -> Socket {
        let what = "connect \(endpoint(host, port))"
        var lastError = SystemError(operation: what, message: "no address")
        for address in try resolveNow(host, port: port, kind: .stream, passive: false) {
            let s = try open(family: address.family, kind: .stream)
            switch s.startConnect(to: address, what) {
            case .connected: return s
            case .failed(let e): lastError = e; continue
            case .pending: break
            }
            var p = pollfd(fd: s.fd, events: Int16(POLLOUT), revents: 0)
            let deadline = ContinuousClock.now + timeout
            var n: Int32 = 0
            repeat {
                let left = ContinuousClock.now.duration(to: deadline)
                n = poll(&p, 1, Int32(clamping: max(0, left.milliseconds)))
            } while n < 0 && Glibc.errno == EINTR
            guard n > 0 else {
                lastError = n == 0 ? .timedOut(what, after: timeout) : .errno(what)
                continue
            }
            if let e = s.connectOutcome(what) { lastError = e } else { return s }
        }
        throw lastError
    }

    private enum ConnectStart { case connected, pending, failed(SystemError) }

    /// Starts a non-blocking connect to `address`.
    private func startConnect(to address: Address, _ what: String) -> ConnectStart {
        let rc = address.bytes.withUnsafeBytes { Glibc.connect(fd, $0.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
        if rc == 0 { return .connected }
        return Glibc.errno == EINPROGRESS ? .pending : .failed(.errno(what))
    }

    /// The outcome of a non-blocking connect once the socket is writable (it is in SO_ERROR).
    private func connectOutcome(_ what: String) -> SystemError? {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) != 0 { code = Glibc.errno }
        return code == 0 ? nil : .errno(what, code)
    }

    /// A UDP socket bound to `host`:`port` (`host` empty or `0.0.0.0` for every address; port 0
    /// for one the kernel picks).
    ///
    /// Without SO_REUSEADDR: UDP has no TIME_WAIT to step over, and with it a second process
    /// bound to the same port would silently take a share of the datagrams instead of failing
    /// with "Address already in use".
    public static func bindUDP(host: String, port: Int) async throws(SystemError) -> Socket {
        let what = "bind \(endpoint(host, port))"
        var lastError = SystemError(operation: what, message: "no address")
        for address in try await resolve(host, port: port, kind: .datagram, passive: true) {
            let s = try open(family: address.family, kind: .datagram)
            let rc = address.bytes.withUnsafeBytes { Glibc.bind(s.fd, $0.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
            if rc == 0 { return s }
            lastError = .errno(what)
        }
        throw lastError
    }

    /// Why `host`:`port` (numeric) cannot be listened on now, or nil: binds a socket as
    /// ``listeningDescriptor(host:port:backlog:)`` does and closes it at once. For `validate`: a
    /// port another program holds, an address not on this machine, a privileged port.
    public static func listenProblem(host: String, port: Int, udp: Bool) -> SystemError? {
        do {
            _ = try listening(host: host, port: port, kind: udp ? .datagram : .stream, backlog: 1)
            return nil
        } catch {
            return error
        }
    }

    /// A TCP socket listening on the numeric `host`:`port`, handed over as its descriptor to a
    /// library that serves it (libmicrohttpd), which closes it. Non-blocking and close-on-exec.
    public static func listeningDescriptor(host: String, port: Int, backlog: Int32) throws(SystemError) -> Int32 {
        try listening(host: host, port: port, kind: .stream, backlog: backlog).detach()
    }

    /// The one bind of a listening socket: SO_REUSEADDR for TCP (a restarted listener steps over
    /// its old connections' TIME_WAIT; not for UDP, see ``bindUDP(host:port:)``), IPV6_V6ONLY on
    /// an IPv6 address (`::` leaves the IPv4 port to others), then `listen` for TCP.
    private static func listening(host: String, port: Int, kind: Kind, backlog: Int32) throws(SystemError) -> Socket {
        let what = "listen on \(endpoint(host, port))"
        guard let address = try resolveNow(host, port: port, kind: kind, passive: true).first else {
            throw SystemError(operation: what, message: "no address")
        }
        let s = try open(family: address.family, kind: kind)
        var one: Int32 = 1
        if kind == .stream && setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) != 0 {
            throw .errno(what)
        }
        if address.family == AF_INET6 && setsockopt(s.fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) != 0 {
            throw .errno(what)
        }
        let rc = address.bytes.withUnsafeBytes { Glibc.bind(s.fd, $0.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count)) }
        guard rc == 0 else { throw .errno(what) }
        if kind == .stream && Glibc.listen(s.fd, backlog) != 0 { throw .errno(what) }
        return s
    }

    private static func open(family: Int32, kind: Kind) throws(SystemError) -> Socket {
        let fd = socket(family, kind.type | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .errno("socket") }
        return Socket(fd: fd)
    }

    // MARK: - Reading and writing

    /// Reads what is there into `buffer` without waiting.
    public func read(into buffer: inout [UInt8]) throws(SystemError) -> ReadResult {
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { return .bytes(n) }
            if n == 0 { return buffer.isEmpty ? .nothing : .end }
            if Glibc.errno == EINTR { continue }
            if Glibc.errno == EAGAIN || Glibc.errno == EWOULDBLOCK { return .nothing }
            throw .errno("recv")
        }
    }

    /// Waits up to `timeout` for data, then reads it into `buffer`; ``ReadResult/nothing`` when
    /// none came.
    public func read(into buffer: inout [UInt8], timeout: Duration, wakeup: Wakeup) async throws -> ReadResult {
        let ready = await wakeup.wait([fd], timeout: timeout)
        try Task.checkCancellation()
        return ready.isEmpty ? .nothing : try read(into: &buffer)
    }

    /// Receives one datagram without waiting; nil when none is queued. The sender is written
    /// `1.2.3.4:5` or `[::1]:5`.
    public func receive(into buffer: inout [UInt8]) throws(SystemError) -> (count: Int, sender: String)? {
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
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Socket.describe($0, length) }
                }
                return (n, sender)
            }
            if Glibc.errno == EINTR { continue }
            if Glibc.errno == EAGAIN || Glibc.errno == EWOULDBLOCK { return nil }
            throw .errno("recvfrom")
        }
    }

    /// Sends all of `bytes`, waiting for room in the socket's buffer as long as `timeout` allows
    /// in total (a peer that stopped reading must not hold the caller forever).
    public func sendAll(_ bytes: [UInt8], timeout: Duration, wakeup: Wakeup) async throws {
        let deadline = ContinuousClock.now + timeout
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                send(fd, raw.baseAddress.map { $0 + sent }, raw.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { sent += n; continue }
            if n < 0 && Glibc.errno == EINTR { continue }
            guard n < 0 && (Glibc.errno == EAGAIN || Glibc.errno == EWOULDBLOCK) else { throw SystemError.errno("send") }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw SystemError.timedOut("send (\(sent) of \(bytes.count) bytes sent)", after: timeout) }
            _ = await wakeup.wait([fd], events: Int16(POLLOUT), timeout: left)
            try Task.checkCancellation()
        }
    }

    // MARK: - Addresses

    /// The address this socket is bound to (`[::1]:5`), nil if it has none.
    public var localAddress: String? { address(getsockname) }

    /// The address of the connected peer, nil when not connected.
    public var peerAddress: String? { address(getpeername) }

    /// The port this socket is bound to, e.g. after binding port 0.
    public var localPort: Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard rc == 0 else { return nil }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { p -> Int? in
            switch family {
            case AF_INET: p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            case AF_INET6: p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            default: nil
            }
        }
    }

    private func address(_ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) } }
        guard rc == 0 else { return nil }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Socket.describe($0, length) } }
    }

    /// `1.2.3.4:5` or `[::1]:5`.
    static func describe(_ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        guard getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                          NI_NUMERICHOST | NI_NUMERICSERV) == 0 else { return "unknown" }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let s = String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return endpoint(h, s)
    }

    /// `host:port`, with an IPv6 literal in brackets.
    static func endpoint(_ host: String, _ port: some CustomStringConvertible) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// One resolved address: its family and the bytes of its `sockaddr`.
    struct Address: Sendable {
        var family: Int32
        var bytes: [UInt8]
    }

    /// Resolves `host`:`port` (a numeric address or a name): off the cooperative pool, because
    /// a name lookup blocks for as long as the resolver takes.
    static func resolve(_ host: String, port: Int, kind: Kind, passive: Bool) async throws(SystemError) -> [Address] {
        try await BlockingWork.run { () throws(SystemError) -> [Address] in try resolveNow(host, port: port, kind: kind, passive: passive) }
    }

    /// Resolves on the calling thread (blocking it for as long as the resolver takes).
    static func resolveNow(_ host: String, port: Int, kind: Kind, passive: Bool) throws(SystemError) -> [Address] {
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = kind.type
            if passive { hints.ai_flags = AI_PASSIVE }
            var list: UnsafeMutablePointer<addrinfo>?
            let rc = getaddrinfo(host.isEmpty ? nil : host, String(port), &hints, &list)
            guard rc == 0, let first = list else {
                // EAI_SYSTEM means the reason is in errno.
                let message = rc == EAI_SYSTEM ? String(cString: strerror(Glibc.errno)) : String(cString: gai_strerror(rc))
                throw SystemError(operation: "resolve \(host)", message: message)
            }
            defer { freeaddrinfo(first) }
            var out: [Address] = []
            var node: UnsafeMutablePointer<addrinfo>? = first
            while let a = node {
                if let addr = a.pointee.ai_addr {
                    out.append(Address(family: a.pointee.ai_family, bytes: Array(UnsafeRawBufferPointer(start: addr, count: Int(a.pointee.ai_addrlen)))))
                }
                node = a.pointee.ai_next
            }
            return out
    }
}
