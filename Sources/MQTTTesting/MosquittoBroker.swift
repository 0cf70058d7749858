import Foundation
import GatewayTesting
#if canImport(Glibc)
import Glibc
#endif

/// A real mosquitto on 127.0.0.1, on free ports, with its own configuration in a temporary
/// directory: a plain listener that needs a user name and password, and a TLS listener that needs
/// a client certificate, with a CA, server and client certificates made with `openssl`.
///
/// Persistence is on, so a broker stopped with ``stop(graceful:)`` (SIGTERM) keeps the sessions
/// and queued messages of persistent subscribers across ``start()``, as a production broker does.
public final class MosquittoBroker: @unchecked Sendable {
    // @unchecked: the process handle is touched only by the test that owns the broker.
    public let directory: String
    public let port: Int
    public let tlsPort: Int
    public let user = "gw1"
    public let password = "s3cret-pw"
    public var caFile: String { directory + "/ca.crt" }
    public var clientCert: String { directory + "/client.crt" }
    public var clientKey: String { directory + "/client.key" }
    /// A CA that signed nothing the broker uses: trusting only it makes the broker's certificate untrusted.
    public var otherCAFile: String { directory + "/other-ca.crt" }
    public var logFile: String { directory + "/mosquitto.log" }
    private var process: Process?
    /// mosquitto's `max_inflight_messages`, which it also advertises to MQTT 5 clients as its
    /// receive maximum; 0 is no limit.
    private let maxInflightMessages: Int

    public init(maxInflightMessages: Int = 0) throws {
        self.maxInflightMessages = maxInflightMessages
        directory = NSTemporaryDirectory() + "locgate-mqtt-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = LoopbackTCPServer.freePort()
        var tls = LoopbackTCPServer.freePort()
        while tls == port { tls = LoopbackTCPServer.freePort() }
        tlsPort = tls
        try makeCertificates()
        try MosquittoBroker.run("/usr/bin/mosquitto_passwd", ["-c", "-b", directory + "/passwd", user, password])
        try writeConfiguration()
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    public var url: String { "mqtt://127.0.0.1:\(port)" }
    public var tlsURL: String { "mqtts://127.0.0.1:\(tlsPort)" }

    /// Starts mosquitto (again, on the same ports) and waits until both listeners accept connections.
    public func start() throws {
        let p = Process()
        // The test process blocks SIGTERM and SIGHUP in the mask its children inherit, and exec
        // keeps the mask: unblock them first, so stop(graceful:) and a reload reach mosquitto.
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", "import os, signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]); "
                       + "os.execv('/usr/sbin/mosquitto', ['mosquitto', '-c', '\(directory)/mosquitto.conf'])"]
        if !FileManager.default.fileExists(atPath: logFile) { _ = FileManager.default.createFile(atPath: logFile, contents: nil) }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        log.seekToEndOfFile()
        p.standardError = log
        p.standardOutput = log
        try p.run()
        process = p
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if MosquittoBroker.accepts(port) && MosquittoBroker.accepts(tlsPort) { return }
            guard p.isRunning else { break }
            usleep(20_000)
        }
        throw BrokerError(description: "mosquitto did not start: \((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "")")
    }

    /// Stops it: SIGTERM lets it save its sessions (a clean broker restart), SIGKILL does not.
    public func stop(graceful: Bool = false) {
        guard let p = process else { return }
        kill(p.processIdentifier, graceful ? SIGTERM : SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    public var isRunning: Bool { process?.isRunning ?? false }

    /// Freezes the broker (SIGSTOP): its connections stay open and nothing is answered, as a hung
    /// broker's; ``resume()`` lets it go on where it stopped.
    public func pause() {
        if let p = process { kill(p.processIdentifier, SIGSTOP) }
    }

    public func resume() {
        if let p = process { kill(p.processIdentifier, SIGCONT) }
    }

    /// Restarts the broker presenting a certificate signed by our CA (`trusted`) or by another one.
    public func presentCertificate(trusted: Bool) throws {
        stop(graceful: true)
        let from = trusted ? "server-trusted" : "server-untrusted"
        for ext in ["crt", "key"] {
            try? FileManager.default.removeItem(atPath: "\(directory)/server.\(ext)")
            try FileManager.default.copyItem(atPath: "\(directory)/\(from).\(ext)", toPath: "\(directory)/server.\(ext)")
            chmod("\(directory)/server.\(ext)", 0o644)
        }
        try start()
    }

    /// Adds a user to the password file and makes the running broker reload it.
    public func addUser(_ name: String, password: String) throws {
        try MosquittoBroker.run("/usr/bin/mosquitto_passwd", ["-b", directory + "/passwd", name, password])
        chmod(directory + "/passwd", 0o644)
        if let p = process { kill(p.processIdentifier, SIGHUP) }
    }

    /// The broker's log so far.
    public func log() -> String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    private func writeConfiguration() throws {
        let conf = """
            per_listener_settings true
            persistence true
            persistence_location \(directory)/
            autosave_interval 1
            # The tests publish faster than a subscriber reads: queue without limit rather than drop.
            max_queued_messages 0
            max_inflight_messages \(maxInflightMessages)
            log_type error
            log_type warning
            log_type notice
            log_type subscribe
            log_timestamp_format %Y-%m-%dT%H:%M:%S

            listener \(port) 127.0.0.1
            allow_anonymous false
            password_file \(directory)/passwd

            listener \(tlsPort) 127.0.0.1
            allow_anonymous true
            cafile \(caFile)
            certfile \(directory)/server.crt
            keyfile \(directory)/server.key
            require_certificate true
            use_identity_as_username true

            """
        try conf.write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
    }

    private func makeCertificates() throws {
        let d = directory
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        func ca(_ name: String, _ cn: String) throws {
            try MosquittoBroker.run("/usr/bin/openssl", ["req", "-x509"] + ec + ["-keyout", "\(d)/\(name).key", "-out", "\(d)/\(name).crt", "-days", "2", "-subj", "/CN=\(cn)"])
        }
        func signed(_ name: String, _ cn: String, _ ext: String, by issuer: String = "ca") throws {
            try MosquittoBroker.run("/usr/bin/openssl", ["req"] + ec + ["-keyout", "\(d)/\(name).key", "-out", "\(d)/\(name).csr", "-subj", "/CN=\(cn)"])
            try ext.write(toFile: "\(d)/\(name).ext", atomically: true, encoding: .utf8)
            try MosquittoBroker.run("/usr/bin/openssl", ["x509", "-req", "-in", "\(d)/\(name).csr", "-CA", "\(d)/\(issuer).crt", "-CAkey", "\(d)/\(issuer).key",
                                                        "-CAcreateserial", "-out", "\(d)/\(name).crt", "-days", "2", "-extfile", "\(d)/\(name).ext"])
        }
        try ca("ca", "locgate test CA")
        try ca("other-ca", "someone else's CA")
        try signed("server", "127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        try signed("client", "gw1", "extendedKeyUsage=clientAuth\n")
        try signed("server-untrusted", "127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n", by: "other-ca")
        try FileManager.default.copyItem(atPath: "\(d)/server.crt", toPath: "\(d)/server-trusted.crt")
        try FileManager.default.copyItem(atPath: "\(d)/server.key", toPath: "\(d)/server-trusted.key")
        // mosquitto drops privileges to its own user when started as root: let it read the keys
        // and write its persistence file.
        for f in ["server.key", "client.key", "ca.crt", "server.crt", "server-untrusted.key", "server-trusted.key"] { chmod("\(d)/\(f)", 0o644) }
        chmod(d, 0o777)
    }

    /// Runs a tool to its end; throws with its output when it fails.
    public static func run(_ tool: String, _ arguments: [String]) throws {
        let r = try Program.run(tool, arguments)
        guard r.status == 0 else {
            throw BrokerError(description: "\(tool) \(arguments.joined(separator: " ")): \(r.output)")
        }
    }

    /// True when something accepts TCP connections on 127.0.0.1:`port`.
    public static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
        return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }
}

public struct BrokerError: Error, CustomStringConvertible {
    public var description: String
}

/// `mosquitto_sub` writing every message it receives, one `topic payload` line each, to a file.
public final class Subscriber: @unchecked Sendable {
    // @unchecked: the process handle is touched only by the test that owns the subscriber.
    public let output: String
    private var process: Process?

    public let id: String

    /// Starts it and waits until the broker logged its subscription; `persistent` keeps its
    /// session (and what is queued for it) while it or the broker is away.
    public init(broker: MosquittoBroker, topic: String, persistent: Bool = false, extra: [String] = []) async throws {
        id = "sub-\(UUID().uuidString.prefix(8))"
        output = broker.directory + "/sub-\(UUID().uuidString).txt"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_sub")
        var args = ["-h", "127.0.0.1", "-p", String(broker.port), "-u", broker.user, "-P", broker.password, "-t", topic, "-q", "1", "-v"]
        args += ["-i", id] + (persistent ? ["-c"] : [])
        p.arguments = args + extra
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let line = "\(id) 1 \(topic)"
        guard await Poll.until(timeout: .seconds(20), { broker.log().contains(line) }) else {
            throw BrokerError(description: "mosquitto_sub did not subscribe: \(broker.log())")
        }
    }

    deinit { stop() }

    public func stop() {
        guard let p = process else { return }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }

    public var isRunning: Bool { process?.isRunning ?? false }

    /// Every message so far: (topic, payload).
    public func messages() -> [(topic: String, payload: String)] {
        guard let text = try? String(contentsOfFile: output, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { (line: Substring) -> (topic: String, payload: String)? in
            guard let space = line.firstIndex(of: " ") else { return nil }
            return (String(line[..<space]), String(line[space...].dropFirst()))
        }
    }
}
