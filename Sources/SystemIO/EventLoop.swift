// The event loop of the listening sources, and its handles: with TCPHandles.swift,
// UDPEndpoint.swift and SocketAddress.swift, the files that talk to libuv (libuv's error codes
// become `SystemError` through `EventLoop.error`; no libuv type appears in a public API).
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
import GatewayCore
import Locking
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
    private let queue = Locked<(jobs: [@Sendable () -> Void], stopped: Bool)>(([], false))
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

    /// Stops a debug build at once when called off the loop's thread: the entry points that must
    /// run on the loop (they touch its handles or state without a lock) begin with it. Release
    /// builds check nothing (`assert`).
    @inline(__always)
    public func assertOnLoop(_ function: StaticString = #function, file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoop, "\(function) must run on the loop thread (reach it with execute or perform)", file: file, line: line)
    }

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

    func register(_ handle: LoopHandle) {
        assertOnLoop()
        handleObjects[ObjectIdentifier(handle)] = handle
    }

    func unregister(_ handle: LoopHandle) {
        assertOnLoop()
        handleObjects[ObjectIdentifier(handle)] = nil
    }

    /// Handles open on this loop (loop thread).
    public var openHandles: Int { handleObjects.count }

    /// Starts a timer that calls `body` every `interval` on the loop thread until stopped.
    public func repeatingTimer(every interval: Duration, _ body: @escaping () -> Void) throws(SystemError) -> LoopTimer {
        assertOnLoop()
        let timer = try LoopTimer(loop: self, body: body)
        let ms = UInt64(max(1, interval.milliseconds))
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
        assertOnLoop()
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
        assertOnLoop()
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
        eventLoop.assertOnLoop()
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
