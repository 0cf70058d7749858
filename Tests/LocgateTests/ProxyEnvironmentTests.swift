import Foundation
import GatewayTesting
import Testing

/// The http sink goes through the proxy named by `https_proxy` when the config names none, as
/// libcurl (and every tool on the box) reads it.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ProxyEnvironmentTests {
    @Test func httpsProxyFromTheEnvironmentIsUsed() async throws {
        let dir = try makeTemporaryDirectoryURL()
        defer { try? FileManager.default.removeItem(at: dir) }
        let certs = try TestCertificates(in: dir.path)
        let support = LocgateBinary.packageRoot.appendingPathComponent("Tests/HTTPOutputTests/Support")
        let received = dir.appendingPathComponent("received.jsonl").path
        let receiver = try ScriptPeer(script: support.appendingPathComponent("receiver.py").path,
                                      arguments: ["--record", received, "--tls-cert", certs.serverCert, "--tls-key", certs.serverKey])
        defer { receiver.stop() }
        let proxied = dir.appendingPathComponent("proxy.log").path
        let proxy = try ScriptPeer(script: support.appendingPathComponent("connect_proxy.py").path, arguments: ["--record", proxied])
        defer { proxy.stop() }

        let nmea = dir.appendingPathComponent("log.nmea").path
        try NMEASamples.writeLog(epochs: 20, to: nmea)
        let config = dir.appendingPathComponent("p.json")
        try #"""
            { "sources": { "rx": { "type": "file", "path": "\#(nmea)" } },
              "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "https://127.0.0.1:\#(receiver.port)/track",
                                 "tls": { "ca_file": "\#(certs.ca)" }, "batch": { "max_positions": 10, "interval": "100ms" },
                                 "queue": { "path": "\#(dir.path)/q.sqlite" } } } }
            """#.write(to: config, atomically: true, encoding: .utf8)
        let r = try LocgateBinary.run(["run", config.path], environment: ["https_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": ""])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = ((try? String(contentsOfFile: proxied, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(lines.first == "CONNECT 127.0.0.1:\(receiver.port) HTTP/1.1", "\(lines)")
        let bodies = ((try? String(contentsOfFile: received, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(bodies.count == 2, "two batches of 10 through the proxy")
    }
}
