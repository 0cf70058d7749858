#if canImport(Glibc)
import Glibc
#endif

/// Checks on files and directories a component will read or write, with no side effects: nothing
/// is created, truncated or locked. Each returns nil when all is well, else why not, naming the
/// resolved absolute path and the system's reason (`strerror`).
public enum FileCheck {
    /// `path` made absolute against the working directory (what `run` would open).
    public static func absolute(_ path: String) -> String {
        var p = path
        while p.hasPrefix("./") { p.removeFirst(2) }
        if p.hasPrefix("/") { return p }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return cwd.hasSuffix("/") ? cwd + p : cwd + "/" + p
    }

    /// The directory a file lives in (`.` for a bare name).
    public static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The system's text for an errno value.
    public static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }

    /// Why nothing can be found at `path` (a device node, a file); nil when something is there.
    public static func existenceProblem(_ path: String) -> String? {
        var st = stat()
        return stat(path, &st) == 0 ? nil : "\(absolute(path)): \(reason(errno))"
    }

    /// Why `path` cannot be read as a regular file (it is opened read-only and closed).
    public static func readProblem(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return "cannot read \(absolute(path)): \(reason(errno))" }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return "cannot stat \(absolute(path)): \(reason(errno))" }
        if (st.st_mode & S_IFMT) == S_IFDIR { return "cannot read \(absolute(path)): \(reason(EISDIR))" }
        return nil
    }

    /// Why a file cannot be written at `path`: an existing one is opened for writing without
    /// creating or truncating it; for a missing one, its directory must exist and be writable.
    public static func writeProblem(_ path: String) -> String? {
        var st = stat()
        if stat(path, &st) == 0 {
            if (st.st_mode & S_IFMT) == S_IFDIR { return "cannot write \(absolute(path)): \(reason(EISDIR))" }
            let fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
            guard fd >= 0 else { return "cannot write \(absolute(path)): \(reason(errno))" }
            close(fd)
            return storagelessProblem(directory(of: path))
        }
        guard errno == ENOENT else { return "cannot write \(absolute(path)): \(reason(errno))" }
        return directoryProblem(directory(of: path), creating: path)
    }

    /// Why files cannot be created in `directory`: missing, not a directory, not writable, or on
    /// a filesystem without storage (`/proc`, `/sys`).
    public static func directoryProblem(_ directory: String, creating file: String? = nil) -> String? {
        let what = file.map { "cannot create \(absolute($0)): directory \(absolute(directory))" } ?? "directory \(absolute(directory))"
        var st = stat()
        guard stat(directory, &st) == 0 else { return "\(what): \(reason(errno))" }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return "\(what): \(reason(ENOTDIR))" }
        guard access(directory, W_OK | X_OK) == 0 else { return "\(what) is not writable: \(reason(errno))" }
        return storagelessProblem(directory)
    }

    /// Bytes available to this user under `directory`, nil when unknown.
    public static func freeBytes(_ directory: String) -> UInt64? {
        var fs = statvfs()
        guard statvfs(directory, &fs) == 0 else { return nil }
        return UInt64(fs.f_bavail) * UInt64(fs.f_frsize)
    }

    /// Why `directory` cannot hold files whatever its permissions (root passes every access
    /// check): it is on a filesystem without storage, such as proc or sysfs, whose free space
    /// reads 0 although nothing is full.
    public static func storagelessProblem(_ directory: String) -> String? {
        var fs = statvfs()
        guard statvfs(directory, &fs) == 0, fs.f_blocks == 0 else { return nil }
        let type = filesystemType(of: directory).map { " (\($0))" } ?? ""
        return "directory \(absolute(directory)) is on a kernel pseudo-filesystem without storage\(type): files cannot be created there"
    }

    /// The type of the filesystem `path` is on, from /proc/self/mounts (the longest mount point
    /// that contains it); nil when unknown.
    static func filesystemType(of path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        let real = String(cString: resolved)
        free(resolved)
        guard let f = fopen("/proc/self/mounts", "r") else { return nil }
        defer { fclose(f) }
        var best: (mountPoint: String, type: String)?
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, f) > 0, let l = line {
            let fields = String(cString: l).split(separator: " ")
            guard fields.count >= 3 else { continue }
            let mountPoint = String(fields[1])
            let contains = real == mountPoint || mountPoint == "/" || real.hasPrefix(mountPoint + "/")
            if contains && mountPoint.count >= (best?.mountPoint.count ?? 0) { best = (mountPoint, String(fields[2])) }
        }
        return best?.type
    }

    /// A byte count for people: `512 B`, `3.2 MiB`, `41.0 GiB`.
    public static func formatBytes(_ n: UInt64) -> String {
        if n < 1024 { return "\(n) B" }
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var v = Double(n) / 1024
        var i = 0
        while v >= 1024 && i < units.count - 1 { v /= 1024; i += 1 }
        return "\((v * 10).rounded() / 10) \(units[i])"
    }
}
