// One of the files that talk to libuv (see EventLoop.swift): TCP listeners and connections.
import CUV
#if canImport(Glibc)
import Glibc
#endif

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
        eventLoop.assertOnLoop()
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
        eventLoop.assertOnLoop()
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
        eventLoop.assertOnLoop()
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
        eventLoop.assertOnLoop()
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
