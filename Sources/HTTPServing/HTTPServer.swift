// The one file of the package that talks to libmicrohttpd, and to the socket calls that make its
// listening socket and watch its connections.
import CMicroHTTPD
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An embedded HTTP/1.1 server (libmicrohttpd) that hands every complete request to a handler,
/// which answers it at once or later, from any thread.
///
/// ```
///  client ─▶ accept ─▶ limits ─▶ headers, body ─────▶ handler(request, responder) ─▶ answered at once,
///              │      (refused:   (deadline; body                                   or suspended until
///              │       counted)    over the limit: 413)                             responder.respond()
///              └─ sweep: a request past its deadline is shut down; a stream whose client left ends
/// ```
///
/// The rules, written once:
/// - libmicrohttpd runs in epoll mode on its own event thread (or `threads` of them, each with
///   its share of the connections): a connection costs a descriptor and a little memory, never a
///   thread. The handler, and a streamed body's calls, run on that thread and must not wait.
/// - A request still unanswered when the handler returns is suspended (`MHD_suspend_connection`):
///   no thread, no idle timeout, nothing read. ``HTTPResponder/respond(_:)`` keeps the answer and
///   resumes the connection (`MHD_resume_connection`), and the event thread queues the answer. A
///   streamed body with nothing to send suspends its connection the same way until its
///   ``HTTPStreamWaker`` is called. Suspending and resuming happen under the request's (or the
///   stream's) lock, so each suspension is resumed exactly once; libmicrohttpd never calls back
///   into this file while holding its own lock (checked in its 0.9.75 source), so the order of the
///   two locks is fixed.
/// - ``Limits`` are enforced in libmicrohttpd's accept policy callback against the counts kept
///   here, so every refusal is counted by reason; libmicrohttpd's own limits are set just above
///   them, as a backstop that never refuses first (at its limit it would stop accepting, and
///   clients would wait in the backlog uncounted).
/// - libmicrohttpd has no whole-request deadline (its timeout is an idle timeout that every byte
///   restarts). Each connection notes when its request began (`MHD_OPTION_NOTIFY_CONNECTION`,
///   then the completion of each request), and a sweep on a Dispatch timer shuts down
///   (`shutdown(2)`) the socket of a connection past the deadline: libmicrohttpd sees the
///   connection end and closes it itself, on its own thread. The sweep holds the connection table's
///   lock, which the close notification also takes before libmicrohttpd closes the descriptor, so
///   it never shuts down a descriptor already reused. The same sweep polls the sockets of streamed
///   responses for a client that hung up, which libmicrohttpd cannot see while they are suspended.
/// - ``stop()`` (or the last reference going) stops accepting (`MHD_quiesce_daemon`) and resumes
///   every suspended connection before `MHD_stop_daemon`, which libmicrohttpd requires; nothing
///   suspends once stopping began, a request still unanswered then gets 503 (sent within
///   ``drainTimeout``), and a later answer is dropped. Never call it from a handler or a body:
///   it waits for the event thread.
public final class HTTPServer: @unchecked Sendable {
    // Unchecked Sendable: `daemon` and `tlsStrings` are set once and freed only in deinit;
    // libmicrohttpd's functions used on the daemon from other threads are thread-safe.

    /// What the server calls with each complete request, on its event thread.
    ///
    /// It must return at once: answer with the responder before returning, or keep the responder
    /// and answer from any thread later (the connection waits suspended meanwhile).
    public typealias Handler = @Sendable (HTTPRequest, HTTPResponder) -> Void

    /// The port actually bound (the configured one, or the kernel's choice for 0).
    public let port: Int
    /// The limits this server enforces.
    public let limits: Limits
    /// libmicrohttpd's event threads.
    public let threads: Int

    private let core: Core
    private let daemon: OpaquePointer
    private let context: Unmanaged<Core>
    /// The PEM texts libmicrohttpd reads; kept until the daemon stops.
    private let tlsStrings: [UnsafeMutablePointer<CChar>]
    private let sweepQueue = DispatchQueue(label: "locgate.http.sweep")
    private let sweepTimer: any DispatchSourceTimer

    /// Binds `host:port` (an IP literal; port 0 lets the kernel choose) and starts serving.
    ///
    /// - Parameters:
    ///   - tls: the PEM certificate chain and unencrypted key files; HTTPS only when given.
    ///   - limits: what clients may take (``Limits``; each default is documented there).
    ///   - threads: libmicrohttpd's event threads (default 1: one event loop serves thousands of
    ///     connections, and a handler must not wait anyway). With more, the connection limits may
    ///     be passed by at most `threads - 1` for a moment.
    ///   - handler: called with each complete request (``Handler``).
    public init(host: String, port: Int, tls: (certFile: String, keyFile: String)? = nil, limits: Limits = Limits(),
                threads: Int = 1, handler: @escaping Handler) throws(HTTPServerError) {
        var problems = limits.problems
        if threads < 1 || threads > 64 { problems.append("threads must be 1 to 64, got \(threads)") }
        guard problems.isEmpty else { throw HTTPServerError(description: "invalid HTTP server settings: " + problems.joined(separator: "; ")) }
        guard MHD_is_feature_supported(MHD_FEATURE.FEATURE_EPOLL) == MHD_Result.YES else {
            throw HTTPServerError(description: "this libmicrohttpd was built without epoll support")
        }
        var pem: [UnsafeMutablePointer<CChar>] = []
        if let tls {
            for (what, path) in [("certificate", tls.certFile), ("key", tls.keyFile)] {
                guard let data = FileManager.default.contents(atPath: path), let copy = strdup(String(decoding: data, as: UTF8.self)) else {
                    pem.forEach { free($0) }
                    throw HTTPServerError(description: "TLS \(what) \(path): cannot read it")
                }
                pem.append(copy)
            }
        }
        let fd: Int32
        do throws(HTTPServerError) {
            fd = try HTTPServer.listenSocket(host: host, port: port, backlog: Int32(min(limits.connections, 4096)))
        } catch {
            pem.forEach { free($0) }
            throw error
        }
        let socketIdentity = HTTPServer.identity(of: fd)
        let core = Core(limits: limits, handler: handler)
        let box = Unmanaged.passRetained(core)
        // Epoll on libmicrohttpd's own thread(s), never a thread per connection: a connection
        // waiting for its answer or its stream's next event is suspended and costs no thread.
        // MHD_ALLOW_SUSPEND_RESUME includes MHD_USE_ITC, which wakes the thread for a resume.
        var flags = MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        if pem.count == 2 { flags |= MHD_USE_TLS.rawValue }
        if host.contains(":") { flags |= MHD_USE_IPv6.rawValue }
        // libmicrohttpd's limits are the backstop just above ours (see the type's rules).
        let backstop = threads
        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: .LISTEN_SOCKET, value: Int(fd), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_LIMIT, value: limits.connections + backstop, ptr_value: nil),
            MHD_OptionItem(option: .PER_IP_CONNECTION_LIMIT,
                           value: limits.connectionsPerAddress == 0 ? 0 : limits.connectionsPerAddress + backstop, ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: Int(HTTPServer.wholeSeconds(limits.idleTimeout)), ptr_value: nil),
            // Each connection's memory pool holds its headers and read buffer, and libmicrohttpd
            // clears it for every request of a kept-alive connection: the default 32 KiB cost
            // 7% of the event thread in memset at 12,000 requests/s, and 320 MB for 10,000
            // phones. 16 KiB leaves room for headers of 8 KiB (nginx's default limit).
            MHD_OptionItem(option: .CONNECTION_MEMORY_LIMIT, value: HTTPServer.connectionMemory, ptr_value: nil),
        ]
        if threads > 1 { options.append(MHD_OptionItem(option: .THREAD_POOL_SIZE, value: threads, ptr_value: nil)) }
        if pem.count == 2 {
            options.append(MHD_OptionItem(option: .HTTPS_MEM_CERT, value: 0, ptr_value: UnsafeMutableRawPointer(pem[0])))
            options.append(MHD_OptionItem(option: .HTTPS_MEM_KEY, value: 0, ptr_value: UnsafeMutableRawPointer(pem[1])))
        }
        options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))
        let started = options.withUnsafeMutableBufferPointer { items in
            locgate_mhd_start(flags, HTTPServer.acceptPolicy, box.toOpaque(), HTTPServer.access, box.toOpaque(),
                              HTTPServer.notifyConnection, HTTPServer.notifyCompleted, box.toOpaque(), items.baseAddress)
        }
        guard let started else {
            // libmicrohttpd closes the socket it was given on some failures (TLS among them) and
            // not on others: closing its number again could close a descriptor opened since.
            if let socketIdentity, HTTPServer.identity(of: fd) == socketIdentity { close(fd) }
            box.release()
            pem.forEach { free($0) }
            let why = tls != nil ? ": is the certificate file a PEM certificate and the key file its unencrypted PEM key?" : ""
            throw HTTPServerError(description: "libmicrohttpd could not start on \(host):\(port)\(why)")
        }
        daemon = started
        context = box
        self.core = core
        tlsStrings = pem
        self.limits = limits
        self.threads = threads
        self.port = HTTPServer.boundPort(fd) ?? port
        // A quarter of the deadline, so a late request is cut within 125% of it; at most a second,
        // which is also how soon a stream's departed client is noticed.
        let interval = DispatchTimeInterval.milliseconds(Int(min(1000, max(50, HTTPServer.milliseconds(limits.requestDeadline) / 4))))
        sweepTimer = DispatchSource.makeTimerSource(queue: sweepQueue)
        sweepTimer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
        sweepTimer.setEventHandler { [core] in core.sweep() }
        sweepTimer.resume()
    }

    /// Stops if ``stop()`` was not called, then frees what libmicrohttpd used.
    deinit {
        stop()
        context.release()
        tlsStrings.forEach { free($0) }
    }

    /// How long ``stop()`` lets waiting requests and streams send their last bytes.
    /// Bytes of libmicrohttpd's memory pool per connection (headers and read buffer).
    static let connectionMemory = 16 * 1024

    public static let drainTimeout: Duration = .seconds(2)

    /// Stops accepting, answers every request still waiting with 503 and ends every stream (for
    /// at most ``drainTimeout``), then closes every connection and the socket; returns when all of
    /// that is done. Calling it again does nothing.
    public func stop() {
        guard !core.stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        sweepTimer.cancel()
        // A sweep already running finishes before the daemon closes any descriptor.
        sweepQueue.sync {}
        // No new connections from here; libmicrohttpd hands the listening socket back to close
        // after the daemon stopped (its thread may still look at it until then).
        let listening = MHD_quiesce_daemon(daemon)
        let drained = DispatchGroup()
        let (requests, streams) = core.suspendable()
        for r in requests { r.serverStopping(drain: drained) }
        for s in streams { s.serverStopping(drain: drained) }
        // libmicrohttpd would close resumed connections without sending what they queued.
        _ = drained.wait(timeout: .now() + .milliseconds(Int(HTTPServer.milliseconds(HTTPServer.drainTimeout))))
        MHD_stop_daemon(daemon)
        if listening >= 0 { close(listening) }
    }

    /// The counters and gauges of ``Statistics``, read now.
    public var statistics: Statistics { core.stats.snapshot }

    /// Whether this libmicrohttpd was built with TLS (Debian's is, through GnuTLS).
    public static var supportsTLS: Bool { MHD_is_feature_supported(MHD_FEATURE.FEATURE_TLS) == MHD_Result.YES }

    // MARK: - Callbacks from libmicrohttpd

    /// Before a new connection is served: the limits, counted when they refuse.
    private static let acceptPolicy: MHD_AcceptPolicyCallback = { cls, address, length in
        guard let cls else { return MHD_Result.NO }
        let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
        let (key, _) = HTTPServer.describe(address, length: Int(length), text: false)
        return core.admit(key) ? MHD_Result.YES : MHD_Result.NO
    }

    /// A connection starts (its record is made) or ends (its record goes).
    private static let notifyConnection: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
        guard let cls, let connection, let socketContext else { return }
        let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
        if code == MHD_ConnectionNotificationCode.CONNECTION_NOTIFY_STARTED {
            let fd = locgate_mhd_connection_info(connection, MHD_ConnectionInfoType.CONNECTION_INFO_CONNECTION_FD)?.pointee.connect_fd ?? -1
            let address = locgate_mhd_connection_info(connection, MHD_ConnectionInfoType.CONNECTION_INFO_CLIENT_ADDRESS)?.pointee.client_addr
            let (key, text) = HTTPServer.describe(address.map { UnsafePointer($0) }, length: MemoryLayout<sockaddr_storage>.size, text: true)
            let record = ConnectionRecord(fd: fd, addressKey: key, addressText: text, now: HTTPServer.monotonicMilliseconds())
            core.opened(record)
            socketContext.pointee = Unmanaged.passRetained(record).toOpaque()
        } else if let raw = socketContext.pointee {
            socketContext.pointee = nil
            core.closed(Unmanaged<ConnectionRecord>.fromOpaque(raw).takeRetainedValue())
        }
    }

    /// Called when the headers are in, once per piece of body, when the request is complete, and
    /// again after a resume.
    private static let access: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, requestState in
        guard let cls, let connection, let requestState else { return MHD_Result.NO }
        let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
        guard let raw = requestState.pointee else {
            // The first call: the headers are in, the body (if any) is not.
            let record = locgate_mhd_connection_info(connection, MHD_ConnectionInfoType.CONNECTION_INFO_SOCKET_CONTEXT)?.pointee.socket_context
                .map { Unmanaged<ConnectionRecord>.fromOpaque($0).takeUnretainedValue() }
            let request = HTTPServer.request(connection, method: method, url: url, peer: record?.addressText ?? "")
            let exchange = RequestExchange(connection: connection, core: core, record: record, request: request)
            requestState.pointee = Unmanaged.passRetained(exchange).toOpaque()
            core.attach(exchange)
            return exchange.headersReceived()
        }
        let exchange = Unmanaged<RequestExchange>.fromOpaque(raw).takeUnretainedValue()
        if let uploadSize, uploadSize.pointee > 0 {
            guard let uploadData else { return MHD_Result.NO }
            let accepted = exchange.receive(UnsafeRawBufferPointer(start: uploadData, count: uploadSize.pointee))
            uploadSize.pointee = 0
            return accepted ? MHD_Result.YES : MHD_Result.NO
        }
        return exchange.requestComplete()
    }

    /// A request is over (answered, or its connection closed): its exchange goes.
    private static let notifyCompleted: MHD_RequestCompletedCallback = { cls, _, requestState, _ in
        guard let cls, let requestState, let raw = requestState.pointee else { return }
        requestState.pointee = nil
        let core = Unmanaged<Core>.fromOpaque(cls).takeUnretainedValue()
        let exchange = Unmanaged<RequestExchange>.fromOpaque(raw).takeRetainedValue()
        exchange.closed()
        core.completed(exchange)
    }

    // MHD_CONTENT_READER_END_OF_STREAM and _END_WITH_ERROR are casts Swift does not import.
    static let endOfStream = -1
    static let endWithError = -2

    /// The bytes of a streamed body; 0 only together with a suspension.
    private static let readStream: MHD_ContentReaderCallback = { cls, _, buffer, max in
        guard let cls, let buffer, max > 0 else { return HTTPServer.endWithError }
        return Unmanaged<StreamExchange>.fromOpaque(cls).takeUnretainedValue().read(into: UnsafeMutableRawPointer(buffer), max: max)
    }

    /// The streamed response is destroyed (it ended, or its connection closed).
    private static let freeStream: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        Unmanaged<StreamExchange>.fromOpaque(cls).takeRetainedValue().finished()
    }

    // MARK: - Requests and responses

    /// What libmicrohttpd's callback fills: the values of one kind, keys lowercased or as sent.
    private struct CollectedValues {
        var values: [String: String] = [:]
        let lowercaseKeys: Bool
    }

    /// The request's values of `kind` (headers, query arguments, cookies); a later value of a key
    /// replaces an earlier one. The count libmicrohttpd returns is not needed: a value that cannot
    /// be read is simply absent.
    private static func values(_ connection: OpaquePointer, _ kind: MHD_ValueKind, lowercaseKeys: Bool) -> [String: String] {
        var collected = CollectedValues(lowercaseKeys: lowercaseKeys)
        withUnsafeMutablePointer(to: &collected) { target in
            _ = MHD_get_connection_values(connection, kind, { target, _, key, value in
                guard let target, let key else { return MHD_Result.YES }
                let c = target.assumingMemoryBound(to: CollectedValues.self)
                let name = String(cString: key)
                c.pointee.values[c.pointee.lowercaseKeys ? name.lowercased() : name] = value.map { String(cString: $0) } ?? ""
                return MHD_Result.YES
            }, target)
        }
        return collected.values
    }

    /// The request as far as the headers go.
    private static func request(_ connection: OpaquePointer, method: UnsafePointer<CChar>?, url: UnsafePointer<CChar>?, peer: String) -> HTTPRequest {
        var request = HTTPRequest(method: method.map { String(cString: $0) } ?? "", path: url.map { String(cString: $0) } ?? "/", peerAddress: peer)
        request.headers = values(connection, MHD_ValueKind.HEADER_KIND, lowercaseKeys: true)
        request.query = values(connection, MHD_ValueKind.GET_ARGUMENT_KIND, lowercaseKeys: false)
        request.cookies = values(connection, MHD_ValueKind.COOKIE_KIND, lowercaseKeys: false)
        return request
    }

    /// Queues `reply` on `connection` (on the event thread, in the access handler).
    fileprivate static func queue(_ reply: HTTPResponse, on connection: OpaquePointer, core: Core, record: ConnectionRecord?) -> MHD_Result {
        let made: OpaquePointer?
        var stream: StreamExchange?
        if let body = reply.stream {
            let exchange = StreamExchange(body: body, connection: connection, core: core, record: record)
            let box = Unmanaged.passRetained(exchange)
            made = MHD_create_response_from_callback(UInt64.max /* MHD_SIZE_UNKNOWN: sent chunked */, 4096,
                                                     HTTPServer.readStream, box.toOpaque(), HTTPServer.freeStream)
            guard made != nil else {
                box.release()
                body.closed()
                return MHD_Result.NO
            }
            let idle = HTTPServer.wholeSeconds(reply.streamIdleTimeout ?? core.limits.idleTimeout)
            guard locgate_mhd_set_timeout(connection, idle) == MHD_Result.YES else {
                // Destroying the response closes the body through freeStream.
                MHD_destroy_response(made)
                return MHD_Result.NO
            }
            stream = exchange
        } else {
            made = reply.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
            }
        }
        guard let response = made else { return MHD_Result.NO }
        // libmicrohttpd holds its own reference once queued; a response not queued ends here.
        defer { MHD_destroy_response(response) }
        for (name, value) in reply.headers where MHD_add_response_header(response, name, value) != MHD_Result.YES {
            return MHD_Result.NO
        }
        guard (100...999).contains(reply.status), MHD_queue_response(connection, UInt32(reply.status), response) == MHD_Result.YES else {
            return MHD_Result.NO
        }
        if let stream {
            core.attach(stream)
            stream.body.start(waker: HTTPStreamWaker { [weak stream] in stream?.wake() })
        }
        return MHD_Result.YES
    }

    fileprivate static func suspend(_ connection: OpaquePointer) { MHD_suspend_connection(connection) }
    fileprivate static func resume(_ connection: OpaquePointer) { MHD_resume_connection(connection) }

    // MARK: - Sockets

    /// Made here rather than by libmicrohttpd so a port in use is reported with its errno, and a
    /// port of 0 can be read back.
    private static func listenSocket(host: String, port: Int, backlog: Int32) throws(HTTPServerError) -> Int32 {
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
        var options = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 && options == 0 {
            options = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard options == 0, bound == 0, listen(fd, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            let address = family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)"
            throw HTTPServerError(description: "cannot listen on \(address): \(reason)")
        }
        return fd
    }

    /// The device and inode of an open descriptor (a socket's are unique while it is open).
    private static func identity(of fd: Int32) -> [UInt64]? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return [UInt64(st.st_dev), UInt64(st.st_ino)]
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

    /// A client's address as the key its per-address count is kept under (its 4 or 16 bytes),
    /// and as text when asked (`inet_ntop`).
    private static func describe(_ address: UnsafePointer<sockaddr>?, length: Int, text: Bool) -> (key: [UInt8], text: String) {
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
    fileprivate static func hungUp(_ fds: [Int32]) -> [Bool] {
        let rdhup: Int16 = 0x2000  // POLLRDHUP, a Linux extension Glibc's module does not export
        var watched = fds.map { pollfd(fd: $0, events: rdhup, revents: 0) }
        guard poll(&watched, nfds_t(watched.count), 0) > 0 else { return fds.map { _ in false } }
        let gone = rdhup | Int16(POLLHUP) | Int16(POLLERR)
        return watched.map { $0.revents & gone != 0 }
    }

    /// Makes libmicrohttpd see the connection end (both directions), so it closes it itself.
    fileprivate static func cutOff(_ fd: Int32) -> Bool { shutdown(fd, Int32(SHUT_RDWR)) == 0 }

    /// Intervals here must not jump with the wall clock.
    static func monotonicMilliseconds() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Int64(t.tv_sec) * 1000 + Int64(t.tv_nsec) / 1_000_000
    }

    /// A duration in whole milliseconds, rounded down.
    static func milliseconds(_ d: Duration) -> Int64 {
        let (seconds, attoseconds) = d.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// libmicrohttpd's timeouts are whole seconds: rounded up, at least 1.
    static func wholeSeconds(_ d: Duration) -> UInt32 {
        UInt32(clamping: max(1, (HTTPServer.milliseconds(d) + 999) / 1000))
    }
}

/// A failure to start the server: the address cannot be bound, TLS files are unusable, the
/// settings are invalid.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, with the address or file concerned.
    public var description: String

    /// An error that says `description`.
    public init(description: String) { self.description = description }
}

// MARK: - Shared state of one server

/// What the callbacks of one server share: its limits, handler, counters and connection table.
final class Core: Sendable {
    let limits: HTTPServer.Limits
    let handler: HTTPServer.Handler
    let stats = StatisticsCounters()
    let stopping = Atomic<Bool>(false)
    private let table = Mutex(Table())

    /// Every open connection, and how many come from each address.
    private struct Table {
        var records: [ObjectIdentifier: ConnectionRecord] = [:]
        var perAddress: [[UInt8]: Int] = [:]
    }

    init(limits: HTTPServer.Limits, handler: @escaping HTTPServer.Handler) {
        self.limits = limits
        self.handler = handler
    }

    var isStopping: Bool { stopping.load(ordering: .sequentiallyConsistent) }

    /// Whether a connection from `address` fits the limits; counts the refusal when not.
    func admit(_ address: [UInt8]) -> Bool {
        table.withLock { t in
            if t.records.count >= limits.connections {
                stats.refusedLimit.add(1, ordering: .relaxed)
                return false
            }
            if limits.connectionsPerAddress > 0 && t.perAddress[address, default: 0] >= limits.connectionsPerAddress {
                stats.refusedPerAddress.add(1, ordering: .relaxed)
                return false
            }
            return true
        }
    }

    func opened(_ record: ConnectionRecord) {
        table.withLock { t in
            t.records[ObjectIdentifier(record)] = record
            t.perAddress[record.addressKey, default: 0] += 1
        }
        stats.accepted.add(1, ordering: .relaxed)
        stats.open.add(1, ordering: .relaxed)
    }

    /// Called before libmicrohttpd closes the descriptor: from here on the sweep leaves it alone.
    func closed(_ record: ConnectionRecord) {
        table.withLock { t in
            t.records[ObjectIdentifier(record)] = nil
            if let n = t.perAddress[record.addressKey] { t.perAddress[record.addressKey] = n > 1 ? n - 1 : nil }
            record.request = nil
            record.stream = nil
        }
        stats.open.subtract(1, ordering: .relaxed)
    }

    func attach(_ exchange: RequestExchange) {
        guard let record = exchange.record else { return }
        table.withLock { _ in record.request = exchange }
    }

    func attach(_ stream: StreamExchange) {
        guard let record = stream.record else { return }
        table.withLock { _ in record.stream = stream }
    }

    func detach(_ stream: StreamExchange) {
        guard let record = stream.record else { return }
        table.withLock { _ in if record.stream === stream { record.stream = nil } }
    }

    /// The request is complete: its deadline no longer applies.
    func received(_ record: ConnectionRecord?) {
        guard let record else { return }
        table.withLock { _ in record.receiving = false }
    }

    /// A request is over: the next one on the connection starts its deadline now.
    func completed(_ exchange: RequestExchange) {
        guard let record = exchange.record else { return }
        let now = HTTPServer.monotonicMilliseconds()
        table.withLock { _ in
            if record.request === exchange { record.request = nil }
            record.receiving = true
            record.requestStartedAt = now
        }
    }

    /// What must be resumed when the server stops.
    func suspendable() -> ([RequestExchange], [StreamExchange]) {
        table.withLock { t in (t.records.values.compactMap(\.request), t.records.values.compactMap(\.stream)) }
    }

    /// Cuts off requests past their deadline; ends streams whose client hung up.
    func sweep() {
        guard !isStopping else { return }
        let now = HTTPServer.monotonicMilliseconds()
        let deadline = HTTPServer.milliseconds(limits.requestDeadline)
        let gone: [StreamExchange] = table.withLock { t in
            var streams: [StreamExchange] = []
            var fds: [Int32] = []
            for record in t.records.values where record.fd >= 0 {
                if record.receiving && !record.deadlineHit && now - record.requestStartedAt >= deadline {
                    record.deadlineHit = true
                    // Counted before the client can see the end; not when the socket was no longer
                    // connected (ENOTCONN: the client left, and libmicrohttpd is closing it anyway).
                    stats.deadlineClosed.add(1, ordering: .relaxed)
                    if !HTTPServer.cutOff(record.fd) { stats.deadlineClosed.subtract(1, ordering: .relaxed) }
                }
                if let s = record.stream {
                    streams.append(s)
                    fds.append(record.fd)
                }
            }
            // Polled under the lock: a descriptor in the table is still this connection's.
            guard !fds.isEmpty else { return [] }
            return zip(streams, HTTPServer.hungUp(fds)).filter(\.1).map(\.0)
        }
        for s in gone { s.clientLeft() }
    }
}

/// One connection as the sweep sees it.
final class ConnectionRecord: @unchecked Sendable {
    // Unchecked Sendable: the vars are read and written only under the server's table lock.
    let fd: Int32
    let addressKey: [UInt8]
    let addressText: String
    /// When the current request began (monotonic milliseconds): accept, or the previous one's end.
    var requestStartedAt: Int64
    /// The current request is not complete yet: its deadline applies.
    var receiving = true
    var deadlineHit = false
    var request: RequestExchange?
    var stream: StreamExchange?

    init(fd: Int32, addressKey: [UInt8], addressText: String, now: Int64) {
        self.fd = fd
        self.addressKey = addressKey
        self.addressText = addressText
        self.requestStartedAt = now
    }
}

// MARK: - One request

/// A request between its headers and its end, and the answer that may come from any thread.
final class RequestExchange: @unchecked Sendable {
    // Unchecked Sendable: `request` is used only on the event thread (libmicrohttpd calls the
    // access handler for a connection one call at a time); `connection` is used on the event
    // thread, or under `state` while the lifecycle says the connection is suspended.
    let connection: OpaquePointer
    let core: Core
    let record: ConnectionRecord?
    private var request: HTTPRequest
    private let state = Mutex(Guarded())

    /// The lifecycle, and the group ``HTTPServer/stop()`` waits on once it resumed this request.
    private struct Guarded {
        var lifecycle = RequestLifecycle()
        var drain: DispatchGroup?
    }

    init(connection: OpaquePointer, core: Core, record: ConnectionRecord?, request: HTTPRequest) {
        self.connection = connection
        self.core = core
        self.record = record
        self.request = request
    }

    // Event thread.

    /// A `Content-Length` over the limit is answered 413 before any of the body is read.
    func headersReceived() -> MHD_Result {
        let limit = core.limits.maximumBodySize
        guard let declared = request.headers["content-length"].flatMap({ UInt64($0) }), declared > UInt64(limit) else { return MHD_Result.YES }
        core.stats.tooLarge.add(1, ordering: .relaxed)
        state.withLock { $0.lifecycle.answeredEarly() }
        core.received(record)
        let reply = HTTPResponse(status: 413, headers: [("Content-Type", "text/plain; charset=utf-8")],
                                 body: Array("request body too large: at most \(limit) bytes\n".utf8))
        return HTTPServer.queue(reply, on: connection, core: core, record: record)
    }

    /// A piece of the body; false (close the connection) once the body passes the limit, which
    /// only a chunked body can do (a declared length over it was answered at the headers).
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard request.body.count + bytes.count <= core.limits.maximumBodySize else {
            core.stats.tooLarge.add(1, ordering: .relaxed)
            return false
        }
        request.body.append(contentsOf: bytes)
        return true
    }

    /// The request is complete (or resumed): run the handler, or queue the answer it waited for.
    func requestComplete() -> MHD_Result {
        switch state.withLock({ $0.lifecycle.phase }) {
        case .receiving:
            core.received(record)
            state.withLock { $0.lifecycle.handlerStarts() }
            runHandler()
            let step = state.withLock { s -> RequestLifecycle.AfterHandler in
                let step = s.lifecycle.handlerReturned(stopping: core.isStopping)
                if case .suspend = step {
                    HTTPServer.suspend(connection)
                    core.stats.suspended.add(1, ordering: .relaxed)
                }
                return step
            }
            switch step {
            case .queue(let reply): return HTTPServer.queue(reply, on: connection, core: core, record: record)
            case .suspend: return MHD_Result.YES
            case .refuse: return HTTPServer.queue(RequestExchange.stopping, on: connection, core: core, record: record)
            }
        case .resuming:
            let reply = state.withLock { $0.lifecycle.resumed() } ?? RequestExchange.stopping
            return HTTPServer.queue(reply, on: connection, core: core, record: record)
        case .handling, .suspended, .answered, .closed:
            // Called again with nothing to queue: closing beats being called in a loop.
            return MHD_Result.NO
        }
    }

    /// In a function of its own so the responder is released when it returns, before the
    /// caller looks for an answer: a handler that dropped it has answered 500 by then.
    @inline(never)
    private func runHandler() {
        core.handler(request, HTTPResponder(self))
    }

    /// The request is over.
    func closed() {
        let unsent = state.withLock { s in
            defer {
                s.drain?.leave()
                s.drain = nil
            }
            return s.lifecycle.closed()
        }
        unsent?.stream?.closed()
    }

    // Any thread.

    func answer(_ response: HTTPResponse) {
        deliver(response, dropped: false)
    }

    var hasAnswer: Bool { state.withLock { $0.lifecycle.hasAnswer } }

    func responderReleased() {
        guard !hasAnswer else { return }
        deliver(HTTPResponse(status: 500, headers: [("Content-Type", "text/plain; charset=utf-8")],
                             body: Array("the request was not answered\n".utf8)), dropped: true)
    }

    private func deliver(_ response: HTTPResponse, dropped: Bool) {
        let outcome = state.withLock { s -> RequestLifecycle.OnAnswer in
            let outcome = s.lifecycle.answered(response)
            // Counted before the answer can reach the client, so a client that has it sees the count.
            if outcome != .ignored && dropped { core.stats.respondersDropped.add(1, ordering: .relaxed) }
            if outcome == .resume {
                core.stats.suspended.subtract(1, ordering: .relaxed)
                HTTPServer.resume(connection)
            }
            return outcome
        }
        if outcome == .ignored { response.stream?.closed() }
    }

    /// A suspended request is resumed (to be answered 503 unless an answer is kept), and `drain`
    /// waits until its connection is done.
    func serverStopping(drain: DispatchGroup) {
        state.withLock { s in
            guard s.lifecycle.serverStopping() else { return }
            core.stats.suspended.subtract(1, ordering: .relaxed)
            HTTPServer.resume(connection)
            drain.enter()
            s.drain = drain
        }
    }

    static let stopping = HTTPResponse(status: 503, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")],
                                       body: Array("the server is stopping\n".utf8))
}

// MARK: - One streamed response

/// A streamed body, the bytes of its last chunk not yet handed over, and its wakes.
final class StreamExchange: @unchecked Sendable {
    // Unchecked Sendable: `pending` and `offset` are used only on the event thread (libmicrohttpd
    // calls the content reader one call at a time); `connection` there, or under `state` while
    // the lifecycle says the connection is suspended.
    let body: any HTTPStreamBody
    let connection: OpaquePointer
    let core: Core
    let record: ConnectionRecord?
    private let state = Mutex(Guarded())
    private var pending: [UInt8] = []

    /// The lifecycle, and the group ``HTTPServer/stop()`` waits on until this stream is over.
    private struct Guarded {
        var lifecycle = StreamLifecycle()
        var drain: DispatchGroup?
    }
    private var offset = 0

    init(body: any HTTPStreamBody, connection: OpaquePointer, core: Core, record: ConnectionRecord?) {
        self.body = body
        self.connection = connection
        self.core = core
        self.record = record
    }

    /// Up to `max` bytes into `buffer`; 0 after suspending the connection, never otherwise.
    func read(into buffer: UnsafeMutableRawPointer, max: Int) -> Int {
        while offset >= pending.count {
            let gone = state.withLock { s -> Bool in
                s.lifecycle.asking()
                return s.lifecycle.clientGone
            }
            if gone { return HTTPServer.endWithError }
            switch body.next() {
            case .bytes(let bytes) where !bytes.isEmpty:
                pending = bytes
                offset = 0
            case .end:
                return HTTPServer.endOfStream
            case .bytes, .later:
                let step = state.withLock { s -> StreamLifecycle.OnLater in
                    let step = s.lifecycle.bodySaidLater(stopping: core.isStopping)
                    if step == .suspend {
                        HTTPServer.suspend(connection)
                        core.stats.suspended.add(1, ordering: .relaxed)
                    }
                    return step
                }
                switch step {
                case .askAgain: continue
                case .suspend: return 0
                case .end: return HTTPServer.endOfStream
                case .abort: return HTTPServer.endWithError
                }
            }
        }
        let count = min(max, pending.count - offset)
        pending.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            buffer.copyMemory(from: base + offset, byteCount: count)
        }
        offset += count
        return count
    }

    /// The response is destroyed: wakes do nothing from now on.
    func finished() {
        state.withLock { s in
            s.lifecycle.finish()
            s.drain?.leave()
            s.drain = nil
        }
        core.detach(self)
        body.closed()
    }

    // Any thread.

    func wake() {
        state.withLock { s in
            if s.lifecycle.wake() { resumed() }
        }
    }

    func clientLeft() {
        state.withLock { s in
            if s.lifecycle.clientLeft() { resumed() }
        }
    }

    /// The stream ends at its next ask, which a suspended one gets now; `drain` waits until it is over.
    func serverStopping(drain: DispatchGroup) {
        state.withLock { s in
            guard s.lifecycle.phase != .finished else { return }
            drain.enter()
            s.drain = drain
            if s.lifecycle.wake() { resumed() }
        }
    }

    /// Under `state`, after the lifecycle said to resume.
    private func resumed() {
        core.stats.suspended.subtract(1, ordering: .relaxed)
        HTTPServer.resume(connection)
    }
}
