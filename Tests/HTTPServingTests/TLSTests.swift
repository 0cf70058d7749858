import Dispatch
import Foundation
import GatewayTesting
import HTTPServing
import Testing

/// HTTPS from PEM files, with answers given later as over plain HTTP.
@Suite(.timeLimit(.minutes(1)))
struct TLSTests {
    @Test func aDeferredAnswerIsServedOverHTTPS() async throws {
        #expect(HTTPServer.supportsTLS, "Debian's libmicrohttpd is built with GnuTLS")
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = try TestCertificates(in: dir)
        let server = try HTTPServer(host: "127.0.0.1", port: 0, tls: (certs.serverCert, certs.serverKey)) { _, responder in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { responder.respond(ok("secret")) }
        }
        defer { server.stop() }
        let secure = try Program.run("/usr/bin/env", ["curl", "-sS", "-m", "10", "--cacert", certs.ca, "https://127.0.0.1:\(server.port)/"])
        #expect(secure.stdout == "secret", "curl: \(secure.stderr)")
        let plain = try exchange(server.port, get("/"))
        #expect(plain?.status != 200, "no plain HTTP on an HTTPS port")
    }

    @Test func aKeyThatIsNotAKeyFailsAtStartAndLeavesThePortFree() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = try TestCertificates(in: dir)
        let port = LoopbackTCPServer.freePort()
        do {
            _ = try HTTPServer(host: "127.0.0.1", port: port, tls: (certs.serverCert, certs.serverCert)) { _, _ in }
            Issue.record("started with a certificate for a key")
        } catch {
            #expect(error.description.hasSuffix(": is the certificate file a PEM certificate and the key file its unencrypted PEM key?"), "\(error)")
        }
        do {
            _ = try HTTPServer(host: "127.0.0.1", port: port, tls: (certs.serverCert, dir + "/missing.key")) { _, _ in }
            Issue.record("started without a key")
        } catch {
            #expect(error.description == "TLS key \(dir)/missing.key: cannot read it")
        }
        // The listening socket of the failed start is closed: the port can be listened on again.
        let again = try HTTPServer(host: "127.0.0.1", port: port) { _, responder in responder.respond(ok("again")) }
        defer { again.stop() }
        #expect(try exchange(port, get("/"))?.text == "again")
    }
}
