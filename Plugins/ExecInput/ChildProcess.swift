// The one file of this plugin that talks to the C library (posix_spawn, pipes, signals, waitpid).
import Locking
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// A system call that failed.
struct ExecError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }

    static func errno(_ operation: String, _ code: Int32 = Glibc.errno) -> ExecError {
        ExecError(message: "\(operation): \(String(cString: strerror(code)))")
    }
}

/// How a child ended.
enum ChildExit: CustomStringConvertible, Sendable {
    case exited(Int32)
    case signalled(Int32)

    var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signalled(let sig): "killed by signal \(sig)"
        }
    }
}

/// A running child process in its own process group, with its stdout and stderr as pipes.
///
/// The owner must call ``terminate(grace:)`` or ``waitForExit()`` so the child is reaped (no
/// zombies); deinit only closes the pipes.
final class ChildProcess: @unchecked Sendable {
    /// Serialises pipe creation and spawning across every exec source (see `init`).
    private static let spawnLock = Locked(())

    // @unchecked: used by one task at a time (the exec source's run loop); pid and fds never change.
    let pid: pid_t
    let stdout: Int32
    let stderr: Int32
    private var reaped: ChildExit?

    /// Starts `argv` with `environment` added to this process's environment, in `cwd` when given.
    init(argv: [String], environment: [String: String], cwd: String?) throws(ExecError) {
        guard let program = argv.first else { throw ExecError(message: "empty command") }
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        // Close-on-exec, so children started by another exec source do not inherit these ends (a
        // reader whose write end leaked never sees EOF); dup2 in the spawn clears the flag on the
        // child's own stdout and stderr. Swift's Glibc has no pipe2, so pipe + fcntl and every
        // spawn share one lock: no spawn can happen while a new pipe still lacks the flag.
        let piped: Bool = ChildProcess.spawnLock.withLock { _ in
            guard pipe(&out) == 0 else { return false }
            guard pipe(&err) == 0 else {
                close(out[0]); close(out[1])
                return false
            }
            for fd in out + err { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return true
        }
        guard piped else { throw .errno("pipe") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, out[1], 1)
        posix_spawn_file_actions_adddup2(&actions, err[1], 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group, so terminating it also reaches the processes it started
        // (a shell script's children); default signal dispositions and mask for the child.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGTERM)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var env: [String: String] = [:]
        var e = environ
        while let entry = e.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            e += 1
        }
        for (k, v) in environment { env[k] = v }
        // Swift's Glibc module does not export posix_spawn_file_actions_addchdir_np, so a working
        // directory goes through a tiny sh trampoline: cd, then exec the program in place of sh.
        let finalArgv = cwd.map { ["/bin/sh", "-c", "cd -- \"$0\" || exit 126; exec \"$@\"", $0] + argv } ?? argv
        let cArgs = finalArgv.map { strdup($0) } + [nil]
        let cEnv = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in cArgs { free(p) }
            for p in cEnv { free(p) }
        }
        var child: pid_t = 0
        // posix_spawnp searches PATH for a bare program name, like a shell.
        let rc = ChildProcess.spawnLock.withLock { _ in posix_spawnp(&child, finalArgv[0], &actions, &attributes, cArgs, cEnv) }
        close(out[1])
        close(err[1])
        guard rc == 0 else {
            close(out[0]); close(err[0])
            throw .errno("cannot start \(program)", rc)
        }
        pid = child
        stdout = out[0]
        stderr = err[0]
    }

    deinit {
        close(stdout)
        close(stderr)
    }

    /// Reads what is available from `fd` (after poll said it is readable); 0 at end of file.
    func read(_ fd: Int32, into buffer: inout [UInt8]) -> Int {
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n >= 0 { return n }
            if Glibc.errno == EINTR { continue }
            return 0
        }
    }

    /// Reaps the child if it has exited; nil while it runs.
    func exitStatus() -> ChildExit? {
        if let reaped { return reaped }
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        guard r == pid else { return nil }
        reaped = ChildProcess.decode(status)
        return reaped
    }

    private static func decode(_ status: Int32) -> ChildExit {
        // WIFEXITED / WTERMSIG are macros Swift cannot import.
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
    }

    /// Waits for the child to exit (after its stdout closed), off the cooperative pool.
    func waitForExit() async -> ChildExit {
        if let r = exitStatus() { return r }
        let pid = self.pid
        let status: Int32 = await BlockingWork.run {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && Glibc.errno == EINTR {}
            return status
        }
        reaped = ChildProcess.decode(status)
        return reaped ?? .exited(0)
    }

    /// SIGTERM to the child's process group, then SIGKILL if it has not exited after `grace`;
    /// always reaps. Not cancellable: it runs during shutdown and must finish.
    func terminate(grace: Duration) async -> (exit: ChildExit, forced: Bool) {
        if let r = exitStatus() {
            // The leader is gone; stragglers in its group still get the signal.
            kill(-pid, SIGKILL)
            return (r, false)
        }
        let pid = self.pid
        let graceMs = grace.milliseconds
        let (status, killed): (Int32, Bool) = await BlockingWork.run {
            kill(-pid, SIGTERM)
            var status: Int32 = 0
            var waited: Int64 = 0
            while waited < graceMs {
                let r = waitpid(pid, &status, WNOHANG)
                if r == pid {
                    kill(-pid, SIGKILL)  // anything it left behind in its group
                    return (status, false)
                }
                usleep(20_000)
                waited += 20
            }
            kill(-pid, SIGKILL)
            while waitpid(pid, &status, 0) < 0 && Glibc.errno == EINTR {}
            return (status, true)
        }
        let exit = ChildProcess.decode(status)
        reaped = exit
        return (exit, killed)
    }
}
