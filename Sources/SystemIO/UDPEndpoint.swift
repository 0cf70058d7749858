// One of the files that talk to libuv (see EventLoop.swift): UDP endpoints.
import CUV
#if canImport(Glibc)
import Glibc
#endif

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
        eventLoop.assertOnLoop()
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
