import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Why a connection to gpsd failed or ended.
struct GpsdConnectionError: Error, Sendable, CustomStringConvertible {
    var description: String
}

/// A TCP connection to gpsd: the only file of this plugin that talks to C.
///
/// The socket is non-blocking and every wait is a `poll` with a short timeout run on the
/// connection's own dispatch queue, so the cooperative thread pool is never blocked and a
/// cancelled task notices within one slice (``slice``). The descriptor is closed in `deinit`.
final class GpsdConnection: Sendable {
    enum ReadResult: Sendable {
        case data([UInt8])
        /// Nothing arrived within the slice.
        case timeout
        /// gpsd closed the connection.
        case closed
        case failed(String)
    }

    /// Longest single wait, so cancellation is observed promptly.
    static let slice: Duration = .milliseconds(200)
    private static let readSize = 16 * 1024

    private let fd: Int32
    private let queue: DispatchQueue
    /// `host:port` as connected, for logs.
    let peer: String

    private init(fd: Int32, queue: DispatchQueue, peer: String) {
        self.fd = fd
        self.queue = queue
        self.peer = peer
    }

    deinit { Glibc.close(fd) }

    /// Resolves `host` and connects to the first address that accepts within `timeout`.
    /// Throws ``GpsdConnectionError`` or `CancellationError`.
    static func connect(host: String, port: Int, timeout: Duration, queue: DispatchQueue) async throws -> GpsdConnection {
        let addresses = try await onQueue(queue) { () throws(GpsdConnectionError) -> [(family: Int32, address: [UInt8])] in
            try resolve(host: host, port: port)
        }
        var lastError = GpsdConnectionError(description: "\(host): no address")
        for (family, address) in addresses {
            try Task.checkCancellation()
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { lastError = GpsdConnectionError(description: "socket: \(errorText())"); continue }
            let connection = GpsdConnection(fd: fd, queue: queue, peer: "\(host):\(port)")
            let rc = address.withUnsafeBytes { raw in
                Glibc.connect(fd, raw.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            if rc == 0 { return connection }
            guard errno == EINPROGRESS else { lastError = GpsdConnectionError(description: "connect \(host):\(port): \(errorText())"); continue }
            let deadline = ContinuousClock.now + timeout
            var outcome: Int32? = nil
            while outcome == nil {
                try Task.checkCancellation()
                if ContinuousClock.now >= deadline { break }
                outcome = await connection.waitConnected()
            }
            switch outcome {
            case 0: return connection
            case nil: lastError = GpsdConnectionError(description: "connect \(host):\(port): timed out after \(timeout)")
            case let code?: lastError = GpsdConnectionError(description: "connect \(host):\(port): \(String(cString: strerror(code)))")
            }
        }
        throw lastError
    }

    /// Waits one slice for the connect to finish: nil while pending, else 0 or the errno.
    private func waitConnected() async -> Int32? {
        let fd = self.fd
        return await Self.onQueue(queue) { () -> Int32? in
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let n = poll(&p, 1, Int32(GpsdConnection.slice.milliseconds))
            if n == 0 || (n < 0 && errno == EINTR) { return nil }
            if n < 0 { return errno }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
            return error
        }
    }

    /// Sends all of `bytes`, waiting at most `timeout` for room.
    func send(_ bytes: [UInt8], timeout: Duration = .seconds(5)) async throws(GpsdConnectionError) {
        let fd = self.fd
        let result: String? = await Self.onQueue(queue) { () -> String? in
            var sent = 0
            let deadline = ContinuousClock.now + timeout
            while sent < bytes.count {
                let n = bytes.withUnsafeBytes { raw in
                    Glibc.send(fd, raw.baseAddress.map { $0 + sent }, raw.count - sent, Int32(MSG_NOSIGNAL))
                }
                if n > 0 { sent += n; continue }
                if n < 0 && errno == EINTR { continue }
                guard n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) else { return "send: \(errorText())" }
                guard ContinuousClock.now < deadline else { return "send: timed out" }
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&p, 1, Int32(GpsdConnection.slice.milliseconds))
            }
            return nil
        }
        if let result { throw GpsdConnectionError(description: result) }
    }

    /// Waits up to one slice for data.
    func read() async -> ReadResult {
        let fd = self.fd
        return await Self.onQueue(queue) { () -> ReadResult in
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, Int32(GpsdConnection.slice.milliseconds))
            if n == 0 || (n < 0 && errno == EINTR) { return .timeout }
            if n < 0 { return .failed("poll: \(errorText())") }
            var buffer = [UInt8](repeating: 0, count: GpsdConnection.readSize)
            while true {
                let r = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
                if r > 0 { buffer.removeSubrange(r...); return .data(buffer) }
                if r == 0 { return .closed }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return .timeout }
                return .failed("recv: \(errorText())")
            }
        }
    }

    // MARK: - C helpers

    private static func resolve(host: String, port: Int) throws(GpsdConnectionError) -> [(family: Int32, address: [UInt8])] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else { throw GpsdConnectionError(description: "\(host): \(String(cString: gai_strerror(rc)))") }
        defer { freeaddrinfo(list) }
        var out: [(family: Int32, address: [UInt8])] = []
        var node = list
        while let info = node?.pointee {
            if let address = info.ai_addr {
                let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(address), count: Int(info.ai_addrlen))
                out.append((info.ai_family, Array(bytes)))
            }
            node = info.ai_next
        }
        return out
    }

    /// Runs blocking work off the cooperative pool.
    private static func onQueue<T: Sendable, E: Error>(_ queue: DispatchQueue, _ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            queue.async {
                do throws(E) { continuation.resume(returning: .success(try body())) } catch { continuation.resume(returning: .failure(error)) }
            }
        }
        return try result.get()
    }
}

private func errorText() -> String { String(cString: strerror(errno)) }
