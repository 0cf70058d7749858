// The one file of the operator API that talks to libmicrohttpd (and to the socket calls that
// make its listening socket).
import CMicroHTTPD
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP request as a handler sees it.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path, without the query string.
    public var path: String
    /// Header values by lowercased name (the last one wins when a header repeats).
    public var headers: [String: String]
    /// Query string arguments, decoded (the last one wins when an argument repeats).
    public var query: [String: String]
    /// Cookies by name.
    public var cookies: [String: String]

    public init(method: String, path: String, headers: [String: String] = [:], query: [String: String] = [:], cookies: [String: String] = [:]) {
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.cookies = cookies
    }
}

/// A response body made while it is sent (Server-Sent Events).
///
/// Both calls come from the connection's own server thread, never from the pipeline's tasks.
public protocol HTTPStreamBody: AnyObject, Sendable {
    /// The next bytes to send, waiting for them as long as needed; nil ends the response.
    /// `clientGone` tells, without blocking, whether the client hung up: a body that waits long
    /// asks it now and then so a closed browser tab frees its connection.
    func next(clientGone: () -> Bool) -> [UInt8]?
    /// The connection is gone (the client left, or the server stops): release what it held.
    func closed()
}

/// An HTTP response: a status, headers and a whole body, or a body streamed until it ends.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// When set, the body is sent as it comes (chunked) instead of `body`.
    public var stream: (any HTTPStreamBody)?
    /// The idle timeout of a streamed response's connection, in seconds (the stream must send
    /// something more often than this).
    public var streamIdleTimeout: UInt32

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = nil
        self.streamIdleTimeout = HTTPServer.connectionTimeout
    }

    public init(status: Int, headers: [(String, String)] = [], stream: any HTTPStreamBody, idleTimeout: UInt32) {
        self.status = status
        self.headers = headers
        self.body = []
        self.stream = stream
        self.streamIdleTimeout = idleTimeout
    }
}

/// A failure to start the server: the address cannot be bound, TLS files are unusable.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// An embedded HTTP/1.1 server (libmicrohttpd) that answers every request with `handler`.
///
/// libmicrohttpd runs one thread per connection, so the server takes nothing from the pipeline's
/// tasks, and a streamed body (``HTTPStreamBody``) may block its connection's thread while it
/// waits for something to send. At most ``connectionLimit`` connections are served at once
/// (more wait in the kernel's backlog or are closed), and a connection idle for
/// ``connectionTimeout`` seconds is closed: a flood of clients cannot exhaust memory or threads.
public final class HTTPServer: @unchecked Sendable {
    public static let connectionLimit: UInt32 = 128
    public static let connectionTimeout: UInt32 = 10

    /// The port actually bound (the configured one, or the kernel's choice for 0).
    public let port: Int
    private let daemon: OpaquePointer
    private let context: Unmanaged<HandlerBox>
    // Unchecked Sendable: `daemon` and `tlsStrings` are set once and only freed in deinit;
    // libmicrohttpd's functions used on the daemon are thread-safe.
    /// The PEM texts libmicrohttpd reads; kept until the daemon stops.
    private let tlsStrings: [UnsafeMutablePointer<CChar>]

    private final class HandlerBox: Sendable {
        let handler: @Sendable (HTTPRequest) -> HTTPResponse
        init(_ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) { self.handler = handler }
    }

    /// Binds `host:port` and starts serving. With `tls`, the PEM certificate chain and key files.
    public init(host: String, port: Int, tls: (certFile: String, keyFile: String)? = nil,
                handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws(HTTPServerError) {
        var pem: [UnsafeMutablePointer<CChar>] = []
        if let tls {
            for (option, path) in [("tls.cert_file", tls.certFile), ("tls.key_file", tls.keyFile)] {
                guard let data = FileManager.default.contents(atPath: path), let copy = strdup(String(decoding: data, as: UTF8.self)) else {
                    pem.forEach { free($0) }
                    throw HTTPServerError(description: "api.\(option) \(path): cannot read it")
                }
                pem.append(copy)
            }
        }
        let fd: Int32
        do throws(HTTPServerError) {
            fd = try HTTPServer.listenSocket(host: host, port: port)
        } catch {
            pem.forEach { free($0) }
            throw error
        }
        let box = Unmanaged.passRetained(HandlerBox(handler))
        // Thread per connection: a live map's event stream waits on its own thread for the next
        // update, which an event loop shared by every connection could not do without polling.
        var flags = MHD_USE_AUTO_INTERNAL_THREAD.rawValue | MHD_USE_THREAD_PER_CONNECTION.rawValue
        if pem.count == 2 { flags |= MHD_USE_TLS.rawValue }
        if host.contains(":") { flags |= MHD_USE_IPv6.rawValue }
        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: .LISTEN_SOCKET, value: Int(fd), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_LIMIT, value: Int(HTTPServer.connectionLimit), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: Int(HTTPServer.connectionTimeout), ptr_value: nil),
        ]
        if pem.count == 2 {
            options.append(MHD_OptionItem(option: .HTTPS_MEM_CERT, value: 0, ptr_value: UnsafeMutableRawPointer(pem[0])))
            options.append(MHD_OptionItem(option: .HTTPS_MEM_KEY, value: 0, ptr_value: UnsafeMutableRawPointer(pem[1])))
        }
        options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))
        let started = options.withUnsafeMutableBufferPointer { items in
            locgate_mhd_start(flags, HTTPServer.answer, box.toOpaque(), items.baseAddress)
        }
        guard let started else {
            close(fd)
            box.release()
            pem.forEach { free($0) }
            let why = tls != nil ? ": is api.tls.cert_file a PEM certificate and api.tls.key_file its unencrypted PEM key?" : ""
            throw HTTPServerError(description: "libmicrohttpd could not start on \(host):\(port)\(why)")
        }
        daemon = started
        context = box
        tlsStrings = pem
        self.port = HTTPServer.boundPort(fd) ?? port
    }

    /// Stops accepting, finishes the requests being answered, closes every connection and the socket.
    deinit {
        MHD_stop_daemon(daemon)
        context.release()
        tlsStrings.forEach { free($0) }
    }

    /// Whether this libmicrohttpd was built with TLS (Debian's is, through GnuTLS).
    public static var supportsTLS: Bool { MHD_is_feature_supported(MHD_FEATURE.FEATURE_TLS) == .YES }

    // MARK: - Answering

    private static let answer: MHD_AccessHandlerCallback = { cls, connection, url, method, _, _, uploadSize, requestState in
        guard let cls, let connection else { return .NO }
        // A request with a body comes back once per chunk and once at its end: the answer was
        // queued at the first call (marked in the request's state), so the body is skipped.
        if let requestState, requestState.pointee != nil {
            uploadSize?.pointee = 0
            return .YES
        }
        requestState?.pointee = cls
        var request = HTTPRequest(method: method.map { String(cString: $0) } ?? "", path: url.map { String(cString: $0) } ?? "/")
        withUnsafeMutablePointer(to: &request.headers) { headers in
            _ = MHD_get_connection_values(connection, MHD_ValueKind.HEADER_KIND, { target, _, key, value in
                guard let target, let key else { return .YES }
                let headers = target.assumingMemoryBound(to: [String: String].self)
                headers.pointee[String(cString: key).lowercased()] = value.map { String(cString: $0) } ?? ""
                return .YES
            }, headers)
        }
        withUnsafeMutablePointer(to: &request.query) { query in
            _ = MHD_get_connection_values(connection, MHD_ValueKind.GET_ARGUMENT_KIND, { target, _, key, value in
                guard let target, let key else { return .YES }
                target.assumingMemoryBound(to: [String: String].self).pointee[String(cString: key)] = value.map { String(cString: $0) } ?? ""
                return .YES
            }, query)
        }
        withUnsafeMutablePointer(to: &request.cookies) { cookies in
            _ = MHD_get_connection_values(connection, MHD_ValueKind.COOKIE_KIND, { target, _, key, value in
                guard let target, let key else { return .YES }
                target.assumingMemoryBound(to: [String: String].self).pointee[String(cString: key)] = value.map { String(cString: $0) } ?? ""
                return .YES
            }, cookies)
        }
        let reply = Unmanaged<HandlerBox>.fromOpaque(cls).takeUnretainedValue().handler(request)
        let made: OpaquePointer?
        if let stream = reply.stream {
            let streamBox = StreamBox(stream)
            streamBox.socket = locgate_mhd_connection_fd(connection)
            let box = Unmanaged.passRetained(streamBox)
            made = MHD_create_response_from_callback(UInt64.max /* MHD_SIZE_UNKNOWN: sent chunked */, 4096, HTTPServer.readStream, box.toOpaque(), HTTPServer.freeStream)
            if made == nil {
                stream.closed()
                box.release()
            } else {
                _ = locgate_mhd_set_timeout(connection, reply.streamIdleTimeout)
            }
        } else {
            made = reply.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
            }
        }
        guard let response = made else { return .NO }
        defer { MHD_destroy_response(response) }
        for (name, value) in reply.headers where MHD_add_response_header(response, name, value) != .YES {
            return .NO
        }
        return MHD_queue_response(connection, UInt32(reply.status), response)
    }

    /// A streamed body and the part of its last chunk not yet handed to libmicrohttpd; used by
    /// one connection thread at a time.
    private final class StreamBox: @unchecked Sendable {
        let body: any HTTPStreamBody
        var pending: [UInt8] = []
        var offset = 0
        var socket: Int32 = -1
        init(_ body: any HTTPStreamBody) { self.body = body }

        /// A hung-up peer makes its socket report RDHUP or HUP; an event stream's client sends
        /// nothing after its request, so readable data means the same.
        func clientGone() -> Bool {
            guard socket >= 0 else { return false }
            let rdhup: Int16 = 0x2000  // POLLRDHUP, a Linux extension Glibc's module does not export
            let watched: Int16 = Int16(POLLIN) | rdhup
            var p = pollfd(fd: socket, events: watched, revents: 0)
            guard poll(&p, 1, 0) == 1 else { return false }
            let gone: Int16 = watched | Int16(POLLHUP) | Int16(POLLERR)
            return p.revents & gone != 0
        }
    }

    // MHD_CONTENT_READER_END_OF_STREAM and _END_WITH_ERROR are casts Swift does not import.
    private static let endOfStream = -1
    private static let endWithError = -2

    private static let readStream: MHD_ContentReaderCallback = { cls, _, buffer, max in
        guard let cls, let buffer, max > 0 else { return HTTPServer.endWithError }
        let box = Unmanaged<StreamBox>.fromOpaque(cls).takeUnretainedValue()
        while box.offset >= box.pending.count {
            guard let next = box.body.next(clientGone: box.clientGone) else { return HTTPServer.endOfStream }
            box.pending = next
            box.offset = 0
        }
        let count = min(max, box.pending.count - box.offset)
        box.pending.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            UnsafeMutableRawPointer(buffer).copyMemory(from: base + box.offset, byteCount: count)
        }
        box.offset += count
        return count
    }

    private static let freeStream: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        let box = Unmanaged<StreamBox>.fromOpaque(cls)
        box.takeUnretainedValue().body.closed()
        box.release()
    }

    // MARK: - The listening socket

    /// Made here rather than by libmicrohttpd so a port in use is reported with its errno, and a
    /// port of 0 can be read back.
    private static func listenSocket(host: String, port: Int) throws(HTTPServerError) -> Int32 {
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        if host.contains(":") {
            family = AF_INET6
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
            guard inet_pton(AF_INET6, host, &a.sin6_addr) == 1 else { throw HTTPServerError(description: "\(host) is not an IPv6 address") }
            withUnsafeBytes(of: a) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            family = AF_INET
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
            guard inet_pton(AF_INET, host, &a.sin_addr) == 1 else { throw HTTPServerError(description: "\(host) is not an IPv4 address") }
            withUnsafeBytes(of: a) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPServerError(description: "cannot open a socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        let bound = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 1024) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            let address = family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)"
            throw HTTPServerError(description: "cannot listen on \(address): \(reason)")
        }
        return fd
    }

    private static func boundPort(_ fd: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard rc == 0 else { return nil }
        return withUnsafeBytes(of: storage) { raw in
            // sin_port and sin6_port sit at the same offset, right after the family.
            Int(UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self)))
        }
    }
}
