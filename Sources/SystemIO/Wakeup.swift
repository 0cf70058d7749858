// Waiting on file descriptors: the wakeup pipe and `poll`. Sockets are in Socket.swift.
import Dispatch
import GatewayCore
#if canImport(Glibc)
import Glibc
#endif

/// A descriptor that a wait reported, with what it is ready for.
public struct Readiness: Sendable, Equatable {
    public var fd: Int32
    /// The `revents` bits `poll` reported.
    public var events: Int16

    public init(fd: Int32, events: Int16) {
        self.fd = fd
        self.events = events
    }

    /// Data (or end of file) can be read.
    public var isReadable: Bool { events & Int16(POLLIN) != 0 }
    /// The far end hung up (a tty after unplug, a closed pipe or socket).
    public var isHungUp: Bool { events & Int16(POLLHUP) != 0 }
    /// An error on the descriptor, or the descriptor is not open.
    public var isFailed: Bool { events & Int16(POLLERR | POLLNVAL) != 0 }
}

/// A pipe that makes a pending `poll` return at once: the cancellation handler writes to it, so a
/// cancelled source wakes without waiting for its poll timeout.
///
/// Make one per `run` and pass every wait on a descriptor through ``wait(_:events:timeout:)``
/// (or ``readiness(_:events:timeout:)``, or a ``Socket`` method that takes it).
public final class Wakeup: Sendable {
    private let readFD: Int32
    private let writeFD: Int32

    /// Opens the pipe (non-blocking, close-on-exec).
    public init() throws(SystemError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .errno("pipe") }
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

    /// Wakes a pending wait (task cancellation calls this).
    public func signal() {
        var b: UInt8 = 1
        _ = write(writeFD, &b, 1)
    }

    /// Un-fires the wakeup (drains the pipe), for a thread that waits in a loop and is woken for
    /// work more than once (the mqtt connection's network thread). A ``signal()`` racing with this
    /// either is drained (its work is seen by the caller, who looks after clearing) or wakes the
    /// next wait.
    public func clear() {
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &buffer, { read(readFD, $0.baseAddress, $0.count) }) > 0 {}
    }

    /// Waits until one of `fds` is ready for `events` (POLLIN or POLLOUT), the wakeup fired, or
    /// `timeout` passed; returns the fds that are ready (errors and hang-ups count as ready), or
    /// none on timeout and cancellation.
    public func wait(_ fds: [Int32], events: Int16 = Int16(POLLIN), timeout: Duration) async -> [Int32] {
        await readiness(fds, events: events, timeout: timeout).map(\.fd)
    }

    /// Like ``wait(_:events:timeout:)``, with what each descriptor is ready for, so a caller can
    /// tell data from a hang-up.
    ///
    /// The blocking poll runs on a Dispatch thread, never on the cooperative pool, and the task's
    /// cancellation fires the wakeup. Once fired, the pipe stays readable, so every later wait of
    /// a cancelled task returns at once too.
    public func readiness(_ fds: [Int32], events: Int16 = Int16(POLLIN), timeout: Duration) async -> [Readiness] {
        if Task.isCancelled { return [] }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<[Readiness], Never>) in
                DispatchQueue.global().async {
                    c.resume(returning: self.waitHere(fds, events: events, timeout: timeout).ready)
                }
            }
        } onCancel: {
            self.signal()
        }
    }

    /// Waits on the calling thread, for code that already runs off the cooperative pool (inside
    /// ``BlockingWork/run(_:)``, or on a C library's thread) and is woken by ``signal()`` from
    /// another thread: the descriptors that are ready, and whether the wakeup had fired (it stays
    /// fired, so every later wait returns at once too).
    public func waitHere(_ fds: [Int32], events: Int16 = Int16(POLLIN), timeout: Duration) -> (ready: [Readiness], woken: Bool) {
        let ms = Int32(clamping: max(0, timeout.milliseconds))
        var pfds = fds.map { pollfd(fd: $0, events: events, revents: 0) }
        pfds.append(pollfd(fd: readFD, events: Int16(POLLIN), revents: 0))
        var n: Int32
        repeat { n = poll(&pfds, nfds_t(pfds.count), ms) } while n < 0 && Glibc.errno == EINTR
        guard n > 0 else { return ([], false) }
        let woken = pfds[pfds.count - 1].revents != 0
        return (pfds.dropLast().filter { $0.revents != 0 }.map { Readiness(fd: $0.fd, events: $0.revents) }, woken)
    }
}
