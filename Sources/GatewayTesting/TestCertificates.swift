import Foundation

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl.
public struct TestCertificates {
    public let dir: String
    public var ca: String { dir + "/ca.pem" }
    public var serverCert: String { dir + "/server.pem" }
    public var serverKey: String { dir + "/server.key" }
    public var clientCert: String { dir + "/client.pem" }
    public var clientKey: String { dir + "/client.key" }
    /// A second CA that signed nothing here: trusting it is trusting the wrong CA.
    public var otherCA: String { dir + "/other-ca.pem" }

    public init(in dir: String) throws {
        self.dir = dir
        let script = """
            set -e
            cd '\(dir)'
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=locgate test CA' -keyout ca.key -out ca.pem
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=other CA' -keyout other-ca.key -out other-ca.pem
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext
            openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' -keyout server.key -out server.csr
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.pem
            openssl req -newkey rsa:2048 -nodes -subj '/CN=gateway-1' -keyout client.key -out client.csr
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out client.pem
            """
        guard Tmpfs.sh(script) == 0 else { throw PeerError(description: "openssl could not make the test certificates") }
    }
}


/// A helper program (a Python script) that prints `PORT <n>` once it listens on 127.0.0.1.
public final class ScriptPeer: @unchecked Sendable {
    public let port: Int
    private let process: Process

    /// Starts `python3 script arguments…` and reads its port.
    public init(script: String, arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", script] + arguments
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        var line: [UInt8] = []
        while let byte = try out.fileHandleForReading.read(upToCount: 1)?.first, byte != 10 { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let n = Int(text.dropFirst(5)) else {
            kill(p.processIdentifier, SIGKILL)
            throw PeerError(description: "\(script) did not start: \(text)")
        }
        port = n
        process = p
    }

    /// SIGKILL: a child of the test process may inherit a mask that blocks SIGTERM.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}
