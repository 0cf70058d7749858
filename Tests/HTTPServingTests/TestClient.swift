// The one file of these tests that talks to the C library: raw loopback TCP clients that send
// exactly the bytes a test says (a trickle, half a request), and the kernel's view of a thread.
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One TCP connection to 127.0.0.1 with blocking reads that give up after a timeout.
final class RawConnection: @unchecked Sendable {
    // Unchecked Sendable: a test uses one connection from one task at a time.
    private let fd: Int32
    private var received: [UInt8] = []
    private(set) var closedByPeer = false

    /// Connects to 127.0.0.1:`port`, from `source` (another loopback address) when given.
    init(port: Int, from source: String? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ClientError("socket") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            guard inet_pton(AF_INET, source, &local.sin_addr) == 1 else {
                close(fd)
                throw ClientError("inet_pton \(source)")
            }
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard bound == 0 else {
                close(fd)
                throw ClientError("bind \(source)")
            }
        }
        var to = sockaddr_in()
        to.sin_family = sa_family_t(AF_INET)
        to.sin_port = in_port_t(UInt16(port).bigEndian)
        to.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
        let rc = withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else {
            close(fd)
            throw ClientError("connect")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Ends the connection at once (the server sees the client leave).
    func hangUp() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Sends all of `bytes`; false when the server closed the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads what arrives within `timeout`; stops early once `done` holds for everything read so
    /// far or the server closes. Returns everything read on this connection.
    @discardableResult
    func read(timeout: Duration = .seconds(10), until done: ([UInt8]) -> Bool = { _ in false }) -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !closedByPeer && !done(received) {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            guard poll(&p, 1, ms) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                received += buffer[..<n]
            } else if n == 0 || (errno != EINTR && errno != EAGAIN) {
                closedByPeer = true
            }
        }
        return received
    }

    /// Reads one whole response (`Content-Length`, chunked, or until the close).
    func response(timeout: Duration = .seconds(10)) -> RawResponse? {
        RawResponse(read(timeout: timeout) { RawResponse($0)?.complete == true })
    }

    /// Whether the server closes the connection within `timeout` (nothing more is expected).
    func closes(within timeout: Duration) -> Bool {
        read(timeout: timeout)
        return closedByPeer
    }
}

/// A response parsed from raw bytes.
struct RawResponse: Sendable {
    var status: Int
    /// By lowercased name.
    var headers: [String: String]
    /// Decoded from chunks when chunked.
    var body: [UInt8]
    /// The whole body is there (its length, or the last chunk, was reached).
    var complete: Bool

    var text: String { String(decoding: body, as: UTF8.self) }

    init?(_ bytes: [UInt8]) {
        let end = Array("\r\n\r\n".utf8)
        guard let split = bytes.indices.first(where: { bytes[$0...].starts(with: end) }) else { return nil }
        let head = String(decoding: bytes[..<split], as: UTF8.self).components(separatedBy: "\r\n")
        guard let statusLine = head.first, let code = statusLine.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return nil }
        status = code
        headers = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let rest = Array(bytes[(split + 4)...])
        if headers["transfer-encoding"]?.lowercased() == "chunked" {
            (body, complete) = RawResponse.dechunk(rest)
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            body = Array(rest.prefix(length))
            complete = rest.count >= length
        } else {
            body = rest
            complete = false
        }
    }

    static func dechunk(_ bytes: [UInt8]) -> ([UInt8], Bool) {
        var out: [UInt8] = []
        var i = 0
        while true {
            guard let lineEnd = bytes[i...].indices.first(where: { bytes[$0...].starts(with: [13, 10]) }),
                  let size = Int(String(decoding: bytes[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16) else { return (out, false) }
            if size == 0 { return (out, true) }
            let start = lineEnd + 2
            guard bytes.count >= start + size + 2 else { return (out + bytes[start..<min(bytes.count, start + size)], false) }
            out += bytes[start..<(start + size)]
            i = start + size + 2
        }
    }
}

struct ClientError: Error, CustomStringConvertible {
    var description: String
    init(_ operation: String) { description = "\(operation): \(String(cString: strerror(errno)))" }
}

/// The kernel's id of the calling thread (what /proc/self/task lists), read from the
/// /proc/thread-self link (`<pid>/task/<tid>`): Glibc's module does not export gettid.
func currentThreadID() -> Int32 {
    let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
    return link.split(separator: "/").last.flatMap { Int32($0) } ?? 0
}

/// CPU time a thread of this process used so far, in clock ticks (user + system), from
/// /proc/self/task/<tid>/stat; nil when the thread is gone.
func cpuTicks(ofThread tid: Int32) -> Int? {
    guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    // After "pid (comm)": state is field 3, utime field 14, stime field 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
    return user + system
}

/// Clock ticks per second (USER_HZ).
let ticksPerSecond = Int(sysconf(Int32(_SC_CLK_TCK)))
