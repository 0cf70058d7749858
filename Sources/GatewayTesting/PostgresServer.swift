import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real PostgreSQL (Debian's `postgresql-15`, with `postgresql-15-postgis-3` for PostGIS) in a
/// temporary directory: `initdb` there, `pg_ctl` on a free loopback port and a Unix socket in the
/// directory, stopped and removed at the end.
///
/// The superuser ``user`` logs in over TCP with ``password`` (scram-sha-256) and over the socket
/// without one (trust), which ``psql(_:database:)`` uses. PostgreSQL refuses to run as root: under
/// root the server and its tools run as the `postgres` user the Debian package creates.
///
/// `fsync` is off unless asked for: a test kills locgate or stops the server with `-m immediate`,
/// never the machine, so the server's crash recovery finds every committed row in the page cache.
public final class PostgresServer: @unchecked Sendable {
    // @unchecked: the server is started and stopped by the test that owns it.
    public let directory: String
    public let port: Int
    public let user = "locgate"
    public let password = "pg-s3cret-pw"
    public var dataDirectory: String { directory + "/data" }
    public var logFile: String { directory + "/server.log" }
    /// The directory of PostgreSQL's programs (initdb, pg_ctl, postgres).
    public let binaries: String
    private let runAs: String?

    /// Makes and starts a cluster; `settings` are extra `-c name=value` server settings.
    public init(fsync: Bool = false, settings: [String: String] = [:]) throws {
        binaries = try PostgresServer.findBinaries()
        directory = NSTemporaryDirectory() + "locgate-pg-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = LoopbackTCPServer.freePort()
        runAs = geteuid() == 0 ? "postgres" : nil
        if let runAs {
            guard let pw = getpwnam(runAs) else { throw PostgresServerError(description: "running as root needs the \(runAs) user (Debian's postgresql package creates it)") }
            chown(directory, pw.pointee.pw_uid, pw.pointee.pw_gid)
        }
        chmod(directory, 0o755)
        try "\(password)\n".write(toFile: directory + "/pwfile", atomically: true, encoding: .utf8)
        chmod(directory + "/pwfile", 0o644)
        try tool("initdb", ["-D", dataDirectory, "-U", user, "--pwfile=\(directory)/pwfile", "-E", "UTF8", "--locale=C",
                            "--auth-local=trust", "--auth-host=scram-sha-256"] + (fsync ? [] : ["--no-sync"]))
        var conf = """
            listen_addresses = '127.0.0.1'
            port = \(port)
            unix_socket_directories = '\(directory)'
            fsync = \(fsync ? "on" : "off")
            log_min_messages = warning
            log_connections = off

            """
        for (name, value) in settings.sorted(by: { $0.key < $1.key }) { conf += "\(name) = \(value)\n" }
        let path = dataDirectory + "/postgresql.auto.conf"
        let existing = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        try (existing + conf).write(toFile: path, atomically: false, encoding: .utf8)
        try start()
    }

    deinit {
        stop(immediate: true)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts the server (again, on the same port) and waits until it accepts connections.
    public func start() throws {
        try tool("pg_ctl", ["-D", dataDirectory, "-l", logFile, "-w", "-t", "60", "start"])
    }

    /// Stops it: `immediate` is `pg_ctl stop -m immediate` (no checkpoint, crash recovery at the
    /// next start), else `-m fast`. Safe to call when it is stopped.
    public func stop(immediate: Bool = false) {
        guard FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid") else { return }
        _ = try? tool("pg_ctl", ["-D", dataDirectory, "-m", immediate ? "immediate" : "fast", "-w", "-t", "60", "stop"])
    }

    /// `postgresql://` URL for `database` as `user` over TCP (the superuser with its password by default).
    public func url(database: String = "postgres", user: String? = nil, password: String? = nil) -> String {
        let u = user ?? self.user
        let p = password ?? (user == nil ? self.password : nil)
        return "postgresql://\(u)\(p.map { ":\($0)" } ?? "")@127.0.0.1:\(port)/\(database)?sslmode=disable"
    }

    /// Runs SQL as the superuser over the Unix socket with `psql` and returns its output: unaligned,
    /// tuples only, fields separated by `|`. Throws with psql's message when a statement fails.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        let r = try Program.run("/usr/bin/psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", String(port),
                                                  "-U", user, "-d", database, "-c", sql])
        guard r.status == 0 else { throw PostgresServerError(description: "psql: \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Creates a database, with PostGIS enabled unless `postgis` is false.
    public func createDatabase(_ name: String, postgis: Bool = true) throws {
        try psql("CREATE DATABASE \"\(name)\"")
        if postgis { try psql("CREATE EXTENSION postgis", database: name) }
    }

    /// The server's log so far.
    public func log() -> String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// Runs one of PostgreSQL's programs (as the `postgres` user under root); throws with its output when it fails.
    ///
    /// Through a Python `exec` that closes every descriptor but the standard three first: Foundation
    /// notices a child's exit by a socket the child inherits, and the server `pg_ctl` leaves running
    /// would inherit it too, so the run would never be seen to end.
    private func tool(_ name: String, _ arguments: [String]) throws {
        let command = (runAs.map { ["/usr/sbin/runuser", "-u", $0, "--"] } ?? []) + ["\(binaries)/\(name)"] + arguments
        let r = try Program.run("/usr/bin/python3", ["-c", "import os, sys; os.closerange(3, 1 << 16); os.execv(sys.argv[1], sys.argv[1:])"] + command,
                                in: URL(fileURLWithPath: directory))
        guard r.status == 0 else {
            throw PostgresServerError(description: "\(name) \(arguments.joined(separator: " ")): \(r.output)\n\(log())")
        }
    }

    /// `pg_config --bindir` when it has initdb, else the newest /usr/lib/postgresql/N/bin.
    private static func findBinaries() throws -> String {
        if let r = try? Program.run("/usr/bin/env", ["pg_config", "--bindir"]), r.status == 0 {
            let dir = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if FileManager.default.isExecutableFile(atPath: dir + "/initdb") { return dir }
        }
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).compactMap(Int.init).sorted()
        for v in versions.reversed() where FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\(v)/bin/initdb") {
            return "/usr/lib/postgresql/\(v)/bin"
        }
        throw PostgresServerError(description: "no PostgreSQL server programs (initdb): install postgresql-15 and postgresql-15-postgis-3 (make deps)")
    }
}

public struct PostgresServerError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
