import EnvironmentChecks
#if canImport(Glibc)
import Glibc
#endif

/// The lock of an SQLite file that one gateway holds alone while it runs (the state store, the
/// command store): an exclusive `flock` on a descriptor of its own.
///
/// flock and SQLite's POSIX locks do not interact on Linux. The descriptor stays open until
/// ``release()``: closing another descriptor of the file would drop SQLite's locks.
package struct SQLiteFileLock: Sendable {
    private let descriptor: Int32

    /// Opens (or creates) `path` owner-only, locks it, and opens one connection to it in WAL mode
    /// with `synchronous=FULL` (what is acknowledged upstream is as durable as the queue's
    /// commits). `holder` says what holds the file in the message when another process does
    /// ("state store"). Throws the reason, without the path.
    package static func open(path: String, holder: String) throws(Problem) -> (SQLiteConnection, SQLiteFileLock) {
        if let problem = FileCheck.directoryProblem(FileCheck.directory(of: path)) { throw Problem(message: problem) }
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Problem(message: "cannot open: \(FileCheck.reason(errno))") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            Glibc.close(fd)
            throw Problem(message: "in use by another locgate (the \(holder) is locked while a pipeline runs)")
        }
        let lock = SQLiteFileLock(descriptor: fd)
        do {
            let c = try SQLiteConnection(path: path)
            try c.execute("PRAGMA journal_mode=WAL")
            try c.execute("PRAGMA synchronous=FULL")
            return (c, lock)
        } catch {
            lock.release()
            throw Problem(message: "\(error)")
        }
    }

    /// Releases the lock (once the connection is closed): another process may open the file.
    package func release() {
        flock(descriptor, LOCK_UN)
        Glibc.close(descriptor)
    }

    /// Why the file could not be opened or locked.
    package struct Problem: Error {
        package let message: String
    }
}
