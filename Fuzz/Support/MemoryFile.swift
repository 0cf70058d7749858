#if canImport(Glibc)
import Glibc
#endif

/// A file with a path and no name on disk, for readers whose entry point opens a file (the
/// `file` source's ``PositionFileReader``): each input is written into it and the reader opens
/// `/proc/self/fd/N`, which gives it its own offset. The file is unlinked as soon as it is
/// created, so nothing is left behind however the run ends.
public final class MemoryFile: Sendable {
    /// The path a reader opens.
    public let path: String
    private let fd: CInt

    /// Creates the file in /dev/shm (memory), else in TMPDIR; a process that cannot is no fuzz
    /// run, so it stops.
    public init(name: String) {
        let directory = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp")
        var template = Array("\(directory)/locgate-\(name)-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { $0.baseAddress.map(mkstemp) ?? -1 }
        if fd < 0 { fatalError("mkstemp in \(directory): \(String(cString: strerror(errno)))") }
        _ = template.withUnsafeBufferPointer { $0.baseAddress.map(unlink) }
        self.fd = fd
        path = "/proc/self/fd/\(fd)"
    }

    deinit { close(fd) }

    /// Replaces the contents with `bytes`.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        if ftruncate(fd, 0) != 0 { fatalError("ftruncate: \(String(cString: strerror(errno)))") }
        var offset = 0
        while offset < bytes.count {
            let n = pwrite(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset, off_t(offset))
            if n < 0 {
                if errno == EINTR { continue }
                fatalError("pwrite: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }
}
