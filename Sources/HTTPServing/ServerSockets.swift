// The socket calls of the server: the connections' identities, addresses and hang-ups (the
// listening socket is SystemIO's, Socket.listeningDescriptor).
#if canImport(Glibc)
import Glibc
#endif

extension HTTPServer {
    /// The device and inode of an open descriptor (a socket's are unique while it is open).
    static func identity(of fd: Int32) -> [UInt64]? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return [UInt64(st.st_dev), UInt64(st.st_ino)]
    }

    static func boundPort(_ fd: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard rc == 0 else { return nil }
        return withUnsafeBytes(of: storage) { raw in
            // sin_port and sin6_port sit at the same offset, right after the family.
            Int(UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self)))
        }
    }

    /// A client's address as the key its per-address count is kept under (its 4 or 16 bytes),
    /// and as text when asked (`inet_ntop`).
    static func describe(_ address: UnsafePointer<sockaddr>?, length: Int, text: Bool) -> (key: [UInt8], text: String) {
        guard let address else { return ([], "") }
        var name = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(address.pointee.sa_family) {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            var ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            let key = withUnsafeBytes(of: ip) { Array($0) }
            guard text, inet_ntop(AF_INET, &ip, &name, socklen_t(name.count)) != nil else { return (key, "") }
            return (key, String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            var ip = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            let key = withUnsafeBytes(of: ip) { Array($0) }
            guard text, inet_ntop(AF_INET6, &ip, &name, socklen_t(name.count)) != nil else { return (key, "") }
            return (key, String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        default:
            return ([], "")
        }
    }

    /// The sockets of streamed responses whose client hung up (POLLRDHUP or POLLHUP or POLLERR).
    static func hungUp(_ fds: [Int32]) -> [Bool] {
        let rdhup: Int16 = 0x2000  // POLLRDHUP, a Linux extension Glibc's module does not export
        var watched = fds.map { pollfd(fd: $0, events: rdhup, revents: 0) }
        guard poll(&watched, nfds_t(watched.count), 0) > 0 else { return fds.map { _ in false } }
        let gone = rdhup | Int16(POLLHUP) | Int16(POLLERR)
        return watched.map { $0.revents & gone != 0 }
    }

    /// Makes libmicrohttpd see the connection end (both directions), so it closes it itself.
    static func cutOff(_ fd: Int32) -> Bool { shutdown(fd, Int32(SHUT_RDWR)) == 0 }
}
