// One of the files that talk to libuv (see EventLoop.swift): socket addresses, parsed and printed by libuv.
import CUV
#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    private var storage: sockaddr_storage
    /// The address without the port, e.g. `192.0.2.7` or `2001:db8::7`.
    public let host: String
    public let port: Int

    /// No address (before a connection is accepted).
    public static let unspecified = SocketAddress(storage: sockaddr_storage(), host: "", port: 0)

    private init(storage: sockaddr_storage, host: String, port: Int) {
        self.storage = storage
        self.host = host
        self.port = port
    }

    /// Parses a numeric IPv4 or IPv6 address (no name resolution: a listening address is one
    /// of the machine's own, written as such).
    public init(host: String, port: Int) throws(SystemError) {
        guard (0...65535).contains(port) else {
            throw SystemError(operation: "address \(host):\(port)", message: "the port must be 0-65535")
        }
        var storage = sockaddr_storage()
        let literal = host == "localhost" ? "127.0.0.1" : host
        let rc: Int32 = withUnsafeMutablePointer(to: &storage) { pointer in
            if literal.contains(":") {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(literal, Int32(port), $0) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(literal, Int32(port), $0) }
        }
        guard rc == 0 else {
            throw SystemError(operation: "address \(host)", message: "not a numeric IPv4 or IPv6 address")
        }
        self.init(storage: storage, host: literal, port: port)
    }

    init(_ address: UnsafePointer<sockaddr>) {
        var storage = sockaddr_storage()
        let family = Int32(address.pointee.sa_family)
        let size = family == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: size)) }
        var text = [CChar](repeating: 0, count: 64)
        var port = 0
        if family == AF_INET6 {
            address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { a in
                _ = uv_ip6_name(a, &text, text.count)
                port = Int(UInt16(bigEndian: a.pointee.sin6_port))
            }
        } else {
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { a in
                _ = uv_ip4_name(a, &text, text.count)
                port = Int(UInt16(bigEndian: a.pointee.sin_port))
            }
        }
        let host = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        self.init(storage: storage, host: host, port: port)
    }

    static func peer(of handle: UnsafeMutablePointer<uv_handle_t>) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                uv_tcp_getpeername(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_tcp_t.self), $0, &length)
            }
        }
        guard rc == 0 else { return nil }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) } }
    }

    static func local(of handle: UnsafeMutablePointer<uv_handle_t>) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { address -> Int32 in
                if handle.pointee.type == UV_UDP {
                    return uv_udp_getsockname(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_udp_t.self), address, &length)
                }
                return uv_tcp_getsockname(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_tcp_t.self), address, &length)
            }
        }
        guard rc == 0 else { return nil }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) } }
    }

    var isIPv6: Bool { Int32(storage.ss_family) == AF_INET6 }

    mutating func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
        withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0) } }
    }

    /// `host:port`, or `[host]:port` for IPv6.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    public static func == (a: SocketAddress, b: SocketAddress) -> Bool { a.host == b.host && a.port == b.port }
    public func hash(into hasher: inout Hasher) { hasher.combine(host); hasher.combine(port) }
}
