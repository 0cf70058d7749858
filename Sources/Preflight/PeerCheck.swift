#if canImport(Glibc)
import Glibc
#endif

/// Whether a peer (gpsd, an NMEA server, an HTTP server, a broker) accepts a TCP connection,
/// for `locgate validate`: a warning only, since a peer that is down now may be up at run time.
public enum PeerCheck {
    /// Connects to `host:port` within `timeout` and closes at once; nil when a connection was
    /// accepted, else why not (`connection refused`, `timed out after 2 s`, a resolver error).
    public static func tcpProblem(host: String, port: Int, timeout: Duration) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else { return "cannot resolve \(host): \(String(cString: gai_strerror(rc)))" }
        defer { freeaddrinfo(list) }
        var problem = "no address for \(host)"
        var next = list
        while let a = next {
            next = a.pointee.ai_next
            switch connect(a.pointee, timeoutMilliseconds: Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)) {
            case nil: return nil
            case let reason?: problem = reason
            }
        }
        return "cannot connect to \(host):\(port): \(problem)"
    }

    private static func connect(_ a: addrinfo, timeoutMilliseconds: Int32) -> String? {
        let fd = socket(a.ai_family, a.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), a.ai_protocol)
        guard fd >= 0 else { return FileCheck.reason(errno) }
        defer { close(fd) }
        if Glibc.connect(fd, a.ai_addr, a.ai_addrlen) == 0 { return nil }
        guard errno == EINPROGRESS else { return FileCheck.reason(errno) }
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let n = poll(&p, 1, timeoutMilliseconds)
        if n == 0 { return "timed out after \(Double(timeoutMilliseconds) / 1000) s" }
        guard n > 0 else { return FileCheck.reason(errno) }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return FileCheck.reason(errno) }
        return error == 0 ? nil : FileCheck.reason(error)
    }
}
