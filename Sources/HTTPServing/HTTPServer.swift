// The one file of the package that talks to libmicrohttpd: the daemon, its callbacks, and the
// responses queued on its connections.
import CMicroHTTPD
import Dispatch
import Foundation
import GatewayCore
import Synchronization
import SystemIO
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
        // Made here rather than by libmicrohttpd so a port in use is reported with its errno, and
        // a port of 0 can be read back.
        do throws(SystemError) {
            fd = try Socket.listeningDescriptor(host: host, port: port, backlog: Int32(min(limits.connections, 4096)))
        } catch {
            pem.forEach { free($0) }
            throw HTTPServerError(description: "cannot \(error)")
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
        let interval = DispatchTimeInterval.milliseconds(Int(min(1000, max(50, limits.requestDeadline.milliseconds / 4))))
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
        _ = drained.wait(timeout: .now() + .milliseconds(Int(HTTPServer.drainTimeout.milliseconds)))
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
            return exchange.headersReceived() ? MHD_Result.YES : MHD_Result.NO
        }
        let exchange = Unmanaged<RequestExchange>.fromOpaque(raw).takeUnretainedValue()
        if let uploadSize, uploadSize.pointee > 0 {
            guard let uploadData else { return MHD_Result.NO }
            let accepted = exchange.receive(UnsafeRawBufferPointer(start: uploadData, count: uploadSize.pointee))
            uploadSize.pointee = 0
            return accepted ? MHD_Result.YES : MHD_Result.NO
        }
        return exchange.requestComplete() ? MHD_Result.YES : MHD_Result.NO
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

    /// Queues `reply` on `connection` (on the event thread, in the access handler); false when
    /// libmicrohttpd refused it (it then closes the connection).
    static func queue(_ reply: HTTPResponse, on connection: OpaquePointer, core: Core, record: ConnectionRecord?) -> Bool {
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
                return false
            }
            let idle = HTTPServer.wholeSeconds(reply.streamIdleTimeout ?? core.limits.idleTimeout)
            guard locgate_mhd_set_timeout(connection, idle) == MHD_Result.YES else {
                // Destroying the response closes the body through freeStream.
                MHD_destroy_response(made)
                return false
            }
            stream = exchange
        } else {
            made = reply.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
            }
        }
        guard let response = made else { return false }
        // libmicrohttpd holds its own reference once queued; a response not queued ends here.
        defer { MHD_destroy_response(response) }
        for (name, value) in reply.headers where MHD_add_response_header(response, name, value) != MHD_Result.YES {
            return false
        }
        guard (100...999).contains(reply.status), MHD_queue_response(connection, UInt32(reply.status), response) == MHD_Result.YES else {
            return false
        }
        if let stream {
            core.attach(stream)
            stream.body.start(waker: HTTPStreamWaker { [weak stream] in stream?.wake() })
        }
        return true
    }

    static func suspend(_ connection: OpaquePointer) { MHD_suspend_connection(connection) }
    static func resume(_ connection: OpaquePointer) { MHD_resume_connection(connection) }
}
