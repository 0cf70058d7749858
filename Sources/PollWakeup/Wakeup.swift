// A library of its own, shared by the plugins that wait on file descriptors (tcp, udp, exec), so
// GatewayCore stays free of I/O and C.
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The wakeup pipe could not be created.
public struct WakeupError: Error, CustomStringConvertible {
    public var description: String
}

/// A pipe that makes a pending `poll` return at once: the cancellation handler writes to it, so a
/// cancelled source wakes without waiting for its poll timeout.
///
/// Make one per `run` and pass every wait on a descriptor through ``wait(_:events:timeout:)``.
public final class Wakeup: Sendable {
    private let readFD: Int32
    private let writeFD: Int32

    /// Opens the pipe (non-blocking, close-on-exec).
    public init() throws(WakeupError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw WakeupError(description: "pipe: \(String(cString: strerror(Glibc.errno)))") }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        readFD = fds[0]
        writeFD = fds[1]
    }

    deinit {
        close(readFD)
        close(writeFD)
    }

    /// Wakes a pending ``wait(_:events:timeout:)`` (task cancellation calls this).
    public func signal() {
        var b: UInt8 = 1
        _ = write(writeFD, &b, 1)
    }

    /// Waits until one of `fds` is ready for `events` (POLLIN or POLLOUT), the wakeup fired, or
    /// `timeout` passed; returns the fds that are ready (errors and hang-ups count as ready), or
    /// none on timeout and cancellation.
    ///
    /// The blocking poll runs on a Dispatch thread, never on the cooperative pool, and the task's
    /// cancellation fires the wakeup. Once fired, the pipe stays readable, so every later wait of
    /// a cancelled task returns at once too.
    public func wait(_ fds: [Int32], events: Int16 = Int16(POLLIN), timeout: Duration) async -> [Int32] {
        if Task.isCancelled { return [] }
        let ms = Int32(clamping: max(0, timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        let wakeFD = readFD
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<[Int32], Never>) in
                DispatchQueue.global().async {
                    var pfds = fds.map { pollfd(fd: $0, events: events, revents: 0) }
                    pfds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
                    var n: Int32
                    repeat { n = poll(&pfds, nfds_t(pfds.count), ms) } while n < 0 && Glibc.errno == EINTR
                    c.resume(returning: n > 0 ? pfds.dropLast().filter { $0.revents != 0 }.map(\.fd) : [])
                }
            }
        } onCancel: {
            self.signal()
        }
    }
}
