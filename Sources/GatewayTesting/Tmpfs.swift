import Foundation

/// Small tmpfs mounts for tests of full disks (root only).
public enum Tmpfs {
    /// Runs a shell command quietly; its exit status, -1 when it could not start.
    @discardableResult
    public static func sh(_ command: String) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// Whether this process may mount a tmpfs (tests that need one are skipped, and say why, when not).
    public static let canMount: Bool = {
        guard getuid() == 0 else { return false }
        let dir = NSTemporaryDirectory() + "locgate-tmpfs-probe-\(getpid())"
        defer { sh("umount '\(dir)' 2>/dev/null; rmdir '\(dir)'") }
        return sh("mkdir -p '\(dir)' && mount -t tmpfs -o size=64k tmpfs '\(dir)'") == 0
    }()

    /// Mounts a tmpfs of `kilobytes` at `path` (created if missing).
    public static func mount(_ path: String, kilobytes: Int) -> Bool {
        sh("mkdir -p '\(path)' && mount -t tmpfs -o size=\(kilobytes)k tmpfs '\(path)'") == 0
    }

    public static func unmount(_ path: String) { sh("umount '\(path)'") }
}
