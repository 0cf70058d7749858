import Glibc

/// Modification time (nanoseconds) and size of a file, nil fields when it cannot be read: what
/// the components that reload a file when it changes (fences, Lua scripts) compare.
public struct FileSignature: Equatable, Sendable {
    public var modified: Int64?
    public var size: Int64?

    public init(path: String) {
        var st = stat()
        if stat(path, &st) == 0 {
            modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            size = Int64(st.st_size)
        }
    }
}
