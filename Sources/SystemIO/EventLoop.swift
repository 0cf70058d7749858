// The one file that talks to libuv: the event loop of the listening sources.
//
// Why libuv and not epoll by hand: the sources that devices call into hold thousands of mostly
// idle connections, each with a read buffer, a write queue and deadlines, plus UDP endpoints
// and timers, on one thread. libuv is the loop under Node.js and does exactly that (edge cases
// included: EMFILE on accept, partial writes, EINTR, IPv6-only binds) behind one small API. Its
// callback model costs one indirect call per event; what we build on it is itself callbacks on
// the loop thread (decode, answer), so the model adds no hop. `Wakeup` (poll on a Dispatch
// thread per wait) stays for the sources that wait on one descriptor.
//
// Threading rule: every handle (listener, connection, UDP endpoint, timer) is created, used and
// closed on its loop's thread. Other threads reach the loop with `execute` (a queue drained on
// the loop after `uv_async_send`) or `perform` (the same, awaited).
import CUV
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A libuv event loop on a thread of its own.
///
/// Listening sources share ``shared``; tests may make their own and must ``stop()`` it.
public final class EventLoop: @unchecked Sendable {
    // Unchecked Sendable: `loop` and the handles are touched only on the loop thread; the queue
    // is behind a mutex and `uv_async_send` is libuv's one thread-safe call.
    let loop: UnsafeMutablePointer<uv_loop_t>
    private let wake: UnsafeMutablePointer<uv_async_t>
    /// Jobs for the loop thread, and whether the loop stopped taking them (one lock: a job is
    /// either run or refused, never dropped unseen).
    private let queue = Mutex<(jobs: [@Sendable () -> Void], stopped: Bool)>(([], false))
    private let loopThread = Atomic<UInt>(0)
    private var thread = pthread_t()
    /// Every read lands here first: a read callback hands the bytes on before the next read.
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Open handles (each kept alive here until closed), so ``stop()`` can close what their
    /// owners did not.
    var handleObjects: [ObjectIdentifier: LoopHandle] = [:]

    /// The process's loop for listening sources, started on first use and never stopped.
    ///
    /// Starting it also raises the process's soft limit of open files to the hard limit
    /// (as Go's runtime does): each connection is a descriptor, and the usual soft limit of 1,024
    /// would refuse devices long before `max_connections`.
    public static let shared: EventLoop = {
        raiseOpenFileLimit()
        do {
            return try EventLoop(name: "locgate-io")
        } catch {
            // Only a failing `pthread_create` or `epoll_create` lands here: the process cannot run.
            fatalError("cannot start the I/O event loop: \(error)")
        }
    }()

    /// Starts a loop on a new thread named `name` (at most 15 bytes are kept by the kernel).
    public init(name: String) throws(SystemError) {
        loop = .allocate(capacity: 1)
        wake = .allocate(capacity: 1)
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        var rc = uv_loop_init(loop)
        guard rc == 0 else {
            loop.deallocate(); wake.deallocate(); readBuffer.deallocate()
            throw EventLoop.error("uv_loop_init", rc)
        }
        loop.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        rc = uv_async_init(loop, wake) { handle in
            guard let data = handle?.pointee.loop.pointee.data else { return }
            Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().drain()
        }
        guard rc == 0 else {
            uv_loop_close(loop)
            loop.deallocate(); wake.deallocate(); readBuffer.deallocate()
            throw EventLoop.error("uv_async_init", rc)
        }
        let start = ThreadStart(loop: self, name: name)
        let box = Unmanaged.passRetained(start).toOpaque()
        let created = pthread_create(&thread, nil, { arg in
            guard let arg else { return nil }
            let start = Unmanaged<ThreadStart>.fromOpaque(arg).takeRetainedValue()
            start.run()
            return nil
        }, box)
        guard created == 0 else {
            Unmanaged<ThreadStart>.fromOpaque(box).release()
            uv_close(UnsafeMutableRawPointer(wake).assumingMemoryBound(to: uv_handle_t.self), nil)
            uv_run(loop, UV_RUN_DEFAULT)
            uv_loop_close(loop)
            loop.deallocate(); wake.deallocate(); readBuffer.deallocate()
            throw .errno("pthread_create", created)
        }
    }

    deinit {
        loop.deallocate()
        wake.deallocate()
        readBuffer.deallocate()
    }

    private final class ThreadStart: @unchecked Sendable {
        let loop: EventLoop
        let name: String
        init(loop: EventLoop, name: String) { self.loop = loop; self.name = name }

        func run() {
            locgate_name_this_thread(name)
            loop.loopThread.store(UInt(pthread_self()), ordering: .releasing)
            uv_run(loop.loop, UV_RUN_DEFAULT)
        }
    }

    /// True on the loop's own thread.
    public var inLoop: Bool { loopThread.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// Milliseconds of the loop's monotonic clock, as of the current iteration (loop thread).
    public var now: UInt64 { uv_now(loop) }

    /// Runs `body` on the loop thread, soon; callable from any thread (on the loop thread it
    /// runs after the current callback). Returns false, and never runs `body`, once the loop
    /// stopped.
    @discardableResult
    public func execute(_ body: @escaping @Sendable () -> Void) -> Bool {
        let taken = queue.withLock { q -> Bool in
            guard !q.stopped else { return false }
            q.jobs.append(body)
            return true
        }
        if taken { uv_async_send(wake) }
        return taken
    }

    /// Runs `body` on the loop thread and returns its result. Once the loop stopped, `body`
    /// never runs and the call throws ``EventLoopStopped``.
    public func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            let taken = execute {
                do {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            if !taken { continuation.resume(returning: .failure(EventLoopStopped())) }
        }
        return try result.get()
    }

    private func drain() {
        while true {
            let (jobs, stopped) = queue.withLock { q -> ([@Sendable () -> Void], Bool) in
                let taken = q.jobs
                q.jobs.removeAll(keepingCapacity: true)
                return (taken, q.stopped)
            }
            if jobs.isEmpty {
                // A job taken before the stop may have opened a handle after the stop closed
                // them all: close it too, or the loop would never end.
                if stopped { for object in Array(handleObjects.values) { object.closeHandle() } }
                return
            }
            for job in jobs { job() }
        }
    }

    /// Closes every handle still open and ends the thread; waits for it. Not from the loop thread.
    public func stop() {
        precondition(!inLoop, "EventLoop.stop() called on its own thread")
        // The last job: jobs taken before it run in the same drain, later ones are refused.
        let first = queue.withLock { q -> Bool in
            guard !q.stopped else { return false }
            q.stopped = true
            q.jobs.append { [self] in
                for object in Array(handleObjects.values) { object.closeHandle() }
                uv_close(UnsafeMutableRawPointer(wake).assumingMemoryBound(to: uv_handle_t.self), nil)
            }
            return true
        }
        guard first else { return }
        uv_async_send(wake)
        pthread_join(thread, nil)
        uv_loop_close(loop)
    }

    // MARK: - Handles

    func register(_ handle: LoopHandle) { handleObjects[ObjectIdentifier(handle)] = handle }
    func unregister(_ handle: LoopHandle) { handleObjects[ObjectIdentifier(handle)] = nil }

    /// Handles open on this loop (loop thread).
    public var openHandles: Int { handleObjects.count }

    /// Starts a timer that calls `body` every `interval` on the loop thread until stopped.
    public func repeatingTimer(every interval: Duration, _ body: @escaping () -> Void) throws(SystemError) -> LoopTimer {
        let timer = try LoopTimer(loop: self, body: body)
        let ms = UInt64(max(1, interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000))
        let rc = uv_timer_start(timer.timer, { handle in
            guard let handle, let data = handle.pointee.data else { return }
            Unmanaged<LoopTimer>.fromOpaque(data).takeUnretainedValue().fire()
        }, ms, ms)
        guard rc == 0 else {
            timer.closeHandle()
            throw EventLoop.error("uv_timer_start", rc)
        }
        return timer
    }

    /// Listens on `host:port` (a numeric IPv4 or IPv6 address; port 0 for any free port) and
    /// hands each accepted connection to `accepted`, which must start or close it.
    public func listenTCP(host: String, port: Int, backlog: Int32 = 1024,
                          accepted: @escaping (TCPConnection) -> Void) throws(SystemError) -> TCPListener {
        var address = try SocketAddress(host: host, port: port)
        let listener = try TCPListener(loop: self, accepted: accepted)
        let flags: UInt32 = address.isIPv6 ? UV_TCP_IPV6ONLY.rawValue : 0
        var rc = address.withSockaddr { uv_tcp_bind(listener.tcp, $0, flags) }
        if rc == 0 {
            rc = uv_listen(listener.stream, backlog) { server, status in
                guard let server, let data = server.pointee.data else { return }
                Unmanaged<TCPListener>.fromOpaque(data).takeUnretainedValue().incoming(status)
            }
        }
        guard rc == 0 else {
            listener.closeHandle()
            throw EventLoop.error("listen on \(address)", rc)
        }
        address = SocketAddress.local(of: listener.handle) ?? address
        listener.address = address
        return listener
    }

    /// Binds a UDP endpoint on `host:port` (port 0 for any free port); `received` gets every
    /// datagram with its sender, on the loop thread, until the endpoint is closed.
    public func bindUDP(host: String, port: Int,
                        received: @escaping (UnsafeRawBufferPointer, SocketAddress, _ truncated: Bool) -> Void) throws(SystemError) -> UDPEndpoint {
        var address = try SocketAddress(host: host, port: port)
        let endpoint = try UDPEndpoint(loop: self, received: received)
        let flags: UInt32 = address.isIPv6 ? UV_UDP_IPV6ONLY.rawValue : 0
        var rc = address.withSockaddr { uv_udp_bind(endpoint.udp, $0, flags) }
        if rc == 0 {
            rc = uv_udp_recv_start(endpoint.udp, EventLoop.allocate) { handle, nread, buffer, sender, flags in
                guard let handle, let data = handle.pointee.data else { return }
                Unmanaged<UDPEndpoint>.fromOpaque(data).takeUnretainedValue()
                    .datagram(nread: nread, base: buffer?.pointee.base, sender: sender, flags: flags)
            }
        }
        guard rc == 0 else {
            endpoint.closeHandle()
            throw EventLoop.error("bind UDP \(address)", rc)
        }
        address = SocketAddress.local(of: endpoint.handle) ?? address
        endpoint.address = address
        return endpoint
    }

    /// Every read of every handle uses the loop's one buffer: the read callback consumes it
    /// before libuv asks for the next.
    static let allocate: uv_alloc_cb = { handle, _, buffer in
        guard let handle, let buffer, let data = handle.pointee.loop.pointee.data else { return }
        let loop = Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue()
        buffer.pointee = uv_buf_init(loop.readBuffer.baseAddress?.assumingMemoryBound(to: CChar.self), UInt32(loop.readBuffer.count))
    }

    static func error(_ operation: String, _ code: Int32) -> SystemError {
        SystemError(operation: operation, message: String(cString: uv_strerror(code)), code: -code)
    }

    /// Raises the soft limit of open files to the hard limit.
    static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// The soft limit of open files of this process (each connection takes one).
    public static var openFileLimit: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return Int(clamping: limit.rlim_cur)
    }
}

/// The event loop was stopped before the work could run.
public struct EventLoopStopped: Error, Sendable, CustomStringConvertible {
    public var description: String { "the I/O event loop has stopped" }
}

// MARK: - Handles

/// A libuv handle owned by a Swift object: the object stays alive while the handle is open
/// (the loop registers it) and frees the handle's memory once libuv closed it.
public class LoopHandle: @unchecked Sendable {
    unowned let eventLoop: EventLoop
    let handle: UnsafeMutablePointer<uv_handle_t>
    private let memory: UnsafeMutableRawPointer
    /// True once closing began.
    public private(set) var isClosed = false

    init(loop: EventLoop, size: Int) {
        eventLoop = loop
        memory = .allocate(byteCount: size, alignment: 16)
        memory.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        handle = memory.assumingMemoryBound(to: uv_handle_t.self)
        loop.register(self)
    }

    /// Sets the handle's back pointer once it was initialised by libuv.
    func attach() { handle.pointee.data = Unmanaged.passUnretained(self).toOpaque() }

    /// Closes the handle; ``closed()`` runs once libuv is done with it.
    func closeHandle() {
        guard !isClosed else { return }
        isClosed = true
        // A handle that failed before its init has no loop: nothing for libuv to close.
        guard handle.pointee.loop != nil else {
            finish()
            return
        }
        uv_close(handle) { handle in
            guard let handle, let data = handle.pointee.data else { return }
            Unmanaged<LoopHandle>.fromOpaque(data).takeUnretainedValue().finish()
        }
    }

    private func finish() {
        closed()
        eventLoop.unregister(self)
        // The memory goes with the object; libuv no longer holds the handle.
    }

    /// Called on the loop thread after libuv closed the handle.
    func closed() {}

    deinit { memory.deallocate() }
}

/// A timer of the loop; stops when ``stop()`` is called or the loop stops.
public final class LoopTimer: LoopHandle, @unchecked Sendable {
    private let body: () -> Void
    var timer: UnsafeMutablePointer<uv_timer_t> { UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_timer_t.self) }

    init(loop: EventLoop, body: @escaping () -> Void) throws(SystemError) {
        self.body = body
        super.init(loop: loop, size: MemoryLayout<uv_timer_t>.size)
        let rc = uv_timer_init(loop.loop, timer)
        guard rc == 0 else {
            closeHandle()
            throw EventLoop.error("uv_timer_init", rc)
        }
        attach()
    }

    func fire() { body() }

    /// Stops the timer (loop thread).
    public func stop() { closeHandle() }
}

/// A listening TCP socket.
public final class TCPListener: LoopHandle, @unchecked Sendable {
    private let accepted: (TCPConnection) -> Void
    /// The bound address (with the kernel's port when 0 was asked for).
    public internal(set) var address = SocketAddress.unspecified
    /// Accepts that failed (other than a connection reset before it was accepted).
    public private(set) var acceptErrors = 0
    var tcp: UnsafeMutablePointer<uv_tcp_t> { UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_tcp_t.self) }
    var stream: UnsafeMutablePointer<uv_stream_t> { UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self) }

    init(loop: EventLoop, accepted: @escaping (TCPConnection) -> Void) throws(SystemError) {
        self.accepted = accepted
        super.init(loop: loop, size: MemoryLayout<uv_tcp_t>.size)
        let rc = uv_tcp_init(loop.loop, tcp)
        guard rc == 0 else {
            closeHandle()
            throw EventLoop.error("uv_tcp_init", rc)
        }
        attach()
    }

    func incoming(_ status: Int32) {
        guard status == 0, !isClosed else {
            acceptErrors += 1
            return
        }
        let connection: TCPConnection
        do {
            connection = try TCPConnection(loop: eventLoop)
        } catch {
            acceptErrors += 1
            return
        }
        let rc = uv_accept(stream, connection.stream)
        guard rc == 0 else {
            acceptErrors += 1
            connection.close()
            return
        }
        _ = uv_tcp_nodelay(connection.tcp, 1)
        connection.peer = SocketAddress.peer(of: connection.handle) ?? .unspecified
        accepted(connection)
    }

    /// Stops listening (loop thread). Connections already accepted stay open.
    public func close() { closeHandle() }
}

/// What a TCP connection tells its owner, on the loop thread.
public protocol TCPConnectionDelegate: AnyObject {
    /// Bytes arrived; they are valid only during the call.
    func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer)
    /// The peer closed (`error` nil) or the connection failed; the connection is closing.
    func connectionEnded(_ connection: TCPConnection, error: SystemError?)
    /// The connection is closed and its handle freed: the last call.
    func connectionClosed(_ connection: TCPConnection)
    /// Queued writes drained below ``TCPConnection/lowWatermark`` after being above the high one.
    func connectionWritable(_ connection: TCPConnection)
}

/// One accepted TCP connection.
///
/// Writes are queued without limit by libuv; the owner reads ``queuedWriteBytes`` and stops
/// reading while the peer does not take its answers (``highWatermark``), so a client that only
/// sends cannot grow the queue.
public final class TCPConnection: LoopHandle, @unchecked Sendable {
    /// Above this many queued bytes the owner should stop reading from the peer.
    public static let highWatermark = 64 * 1024
    /// Below this, ``TCPConnectionDelegate/connectionWritable(_:)`` is called after a high mark.
    public static let lowWatermark = 16 * 1024

    /// Held strongly until the connection is closed, then released: a weak reference would give
    /// every delegate a side table, and each retain of it (a sweep over 10,000 connections) the
    /// slow path.
    public var delegate: (any TCPConnectionDelegate)?
    /// The peer's address.
    public internal(set) var peer = SocketAddress.unspecified
    public private(set) var isReading = false
    private var ending = false
    private var closeWhenWritten = false
    private var pendingWrites = 0
    private var aboveHighWatermark = false
    var tcp: UnsafeMutablePointer<uv_tcp_t> { UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_tcp_t.self) }
    var stream: UnsafeMutablePointer<uv_stream_t> { UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self) }

    init(loop: EventLoop) throws(SystemError) {
        super.init(loop: loop, size: MemoryLayout<uv_tcp_t>.size)
        let rc = uv_tcp_init(loop.loop, tcp)
        guard rc == 0 else {
            closeHandle()
            throw EventLoop.error("uv_tcp_init", rc)
        }
        attach()
    }

    /// Bytes written but not yet taken by the kernel.
    public var queuedWriteBytes: Int { isClosed ? 0 : uv_stream_get_write_queue_size(stream) }

    /// Starts (or resumes) delivering received bytes to the delegate.
    public func startReading() {
        guard !isReading, !isClosed, !ending else { return }
        let rc = uv_read_start(stream, EventLoop.allocate) { stream, nread, buffer in
            guard let stream, let data = stream.pointee.data else { return }
            Unmanaged<TCPConnection>.fromOpaque(data).takeUnretainedValue().read(nread, base: buffer?.pointee.base)
        }
        if rc == 0 {
            isReading = true
        } else {
            end(EventLoop.error("read from \(peer)", rc))
        }
    }

    /// Stops reading: the kernel's buffers fill and TCP slows the peer down (back-pressure).
    public func stopReading() {
        guard isReading, !isClosed else { return }
        uv_read_stop(stream)
        isReading = false
    }

    private func read(_ nread: Int, base: UnsafeMutablePointer<CChar>?) {
        if nread > 0, let base {
            delegate?.connection(self, received: UnsafeRawBufferPointer(start: base, count: nread))
        } else if nread < 0 {
            end(nread == Int(UV_EOF.rawValue) ? nil : EventLoop.error("read from \(peer)", Int32(nread)))
        }
    }

    private func end(_ error: SystemError?) {
        guard !ending, !isClosed else { return }
        ending = true
        stopReading()
        delegate?.connectionEnded(self, error: error)
        close()
    }

    /// Sends `bytes` after what was written before. Ignored once the connection is closing.
    public func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty, !isClosed else { return }
        var offset = 0
        // The common case (a short answer, a socket with room) needs no request and no copy.
        if uv_stream_get_write_queue_size(stream) == 0 && pendingWrites == 0 {
            let rc = bytes.withUnsafeBytes { raw -> Int32 in
                var buffer = uv_buf_init(UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), UInt32(raw.count))
                return uv_try_write(stream, &buffer, 1)
            }
            if rc == Int32(bytes.count) { return }
            if rc > 0 {
                offset = Int(rc)
            } else if rc != Int32(UV_EAGAIN.rawValue) && rc != Int32(UV_ENOSYS.rawValue) {
                end(EventLoop.error("write to \(peer)", rc))
                return
            }
        }
        let count = bytes.count - offset
        let request = WriteRequest(count: count)
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            request.data.copyMemory(from: base + offset, byteCount: count)
        }
        request.request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        var buffer = uv_buf_init(request.data.assumingMemoryBound(to: CChar.self), UInt32(count))
        let rc = uv_write(request.request, stream, &buffer, 1) { request, status in
            guard let request, let data = request.pointee.data else { return }
            let connection = Unmanaged<TCPConnection>.fromOpaque(data).takeRetainedValue()
            WriteRequest.free(request)
            connection.written(status)
        }
        guard rc == 0 else {
            Unmanaged<TCPConnection>.fromOpaque(request.request.pointee.data).release()
            WriteRequest.free(request.request)
            end(EventLoop.error("write to \(peer)", rc))
            return
        }
        pendingWrites += 1
        if uv_stream_get_write_queue_size(stream) > Self.highWatermark { aboveHighWatermark = true }
    }

    private func written(_ status: Int32) {
        pendingWrites -= 1
        if status < 0 && status != Int32(UV_ECANCELED.rawValue) {
            end(EventLoop.error("write to \(peer)", status))
            return
        }
        if closeWhenWritten && pendingWrites == 0 {
            closeHandle()
            return
        }
        if aboveHighWatermark && !isClosed && uv_stream_get_write_queue_size(stream) < Self.lowWatermark {
            aboveHighWatermark = false
            delegate?.connectionWritable(self)
        }
    }

    /// Closes the connection; with `afterWrites`, once what was written so far has been sent
    /// (an answer that refuses a device, then the close).
    public func close(afterWrites: Bool = false) {
        guard !isClosed else { return }
        stopReading()
        if afterWrites && pendingWrites > 0 {
            closeWhenWritten = true
            return
        }
        closeHandle()
    }

    override func closed() {
        delegate?.connectionClosed(self)
        delegate = nil
    }
}

/// A write's request and its copy of the bytes, in one allocation.
private struct WriteRequest {
    let request: UnsafeMutablePointer<uv_write_t>
    let data: UnsafeMutableRawPointer

    init(count: Int) {
        let header = (MemoryLayout<uv_write_t>.size + 15) & ~15
        let memory = UnsafeMutableRawPointer.allocate(byteCount: header + count, alignment: 16)
        request = memory.bindMemory(to: uv_write_t.self, capacity: 1)
        data = memory + header
    }

    static func free(_ request: UnsafeMutablePointer<uv_write_t>) {
        UnsafeMutableRawPointer(request).deallocate()
    }
}

/// A bound UDP socket.
public final class UDPEndpoint: LoopHandle, @unchecked Sendable {
    private let received: (UnsafeRawBufferPointer, SocketAddress, Bool) -> Void
    /// The bound address (with the kernel's port when 0 was asked for).
    public internal(set) var address = SocketAddress.unspecified
    /// Sends that failed at once or in libuv.
    public private(set) var sendErrors = 0
    var udp: UnsafeMutablePointer<uv_udp_t> { UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_udp_t.self) }

    init(loop: EventLoop, received: @escaping (UnsafeRawBufferPointer, SocketAddress, Bool) -> Void) throws(SystemError) {
        self.received = received
        super.init(loop: loop, size: MemoryLayout<uv_udp_t>.size)
        let rc = uv_udp_init(loop.loop, udp)
        guard rc == 0 else {
            closeHandle()
            throw EventLoop.error("uv_udp_init", rc)
        }
        attach()
    }

    func datagram(nread: Int, base: UnsafeMutablePointer<CChar>?, sender: UnsafePointer<sockaddr>?, flags: UInt32) {
        // nread 0 without a sender: the socket has nothing more for now.
        guard nread >= 0, let sender, let base, !isClosed else { return }
        let from = SocketAddress(sender)
        received(UnsafeRawBufferPointer(start: base, count: nread), from, flags & UV_UDP_PARTIAL.rawValue != 0)
    }

    /// Sends one datagram to `peer`.
    public func send(_ bytes: [UInt8], to peer: SocketAddress) {
        guard !isClosed, !bytes.isEmpty else { return }
        var target = peer
        let sent = bytes.withUnsafeBytes { raw -> Int32 in
            var buffer = uv_buf_init(UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: CChar.self)), UInt32(raw.count))
            return target.withSockaddr { uv_udp_try_send(udp, &buffer, 1, $0) }
        }
        if sent == Int32(bytes.count) { return }
        guard sent == Int32(UV_EAGAIN.rawValue) else {
            sendErrors += 1
            return
        }
        // The socket's buffer is full: queue it in libuv.
        let header = (MemoryLayout<uv_udp_send_t>.size + 15) & ~15
        let memory = UnsafeMutableRawPointer.allocate(byteCount: header + bytes.count, alignment: 16)
        let request = memory.bindMemory(to: uv_udp_send_t.self, capacity: 1)
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            (memory + header).copyMemory(from: base, byteCount: raw.count)
        }
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        var buffer = uv_buf_init((memory + header).assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        let rc = target.withSockaddr { address in
            uv_udp_send(request, udp, &buffer, 1, address) { request, status in
                guard let request, let data = request.pointee.data else { return }
                let endpoint = Unmanaged<UDPEndpoint>.fromOpaque(data).takeRetainedValue()
                UnsafeMutableRawPointer(request).deallocate()
                if status < 0 && status != Int32(UV_ECANCELED.rawValue) { endpoint.sendErrors += 1 }
            }
        }
        if rc != 0 {
            Unmanaged<UDPEndpoint>.fromOpaque(request.pointee.data).release()
            memory.deallocate()
            sendErrors += 1
        }
    }

    /// Stops receiving and closes the socket (loop thread).
    public func close() { closeHandle() }
}

// MARK: - Addresses

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
