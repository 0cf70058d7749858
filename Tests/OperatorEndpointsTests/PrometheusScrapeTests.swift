import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// A real Prometheus (Debian's `prometheus`) scrapes the API.
@Suite struct PrometheusScrapeTests {
    @Test(.timeLimit(.minutes(1)))
    func prometheusScrapesTheAPIWithItsBearerToken() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("prometheus")
        let json = """
        { "settings": { "stats_interval": false, "shutdown_timeout": "2s" },
          "api": { "listen": "127.0.0.1:$API_PORT", "token": "scrape-me" },
          "sources": { "gps": { "type": "tcp", "host": "127.0.0.1", "port": \(peer.port), "device": "boat-1" } },
          "sinks": { "out": { "type": "file", "inputs": ["gps"], "path": "\(dir)/out.jsonl" } } }
        """
        try await APIHarness.run(json) { h in
            let prometheus = try PrometheusServer(scraping: h.port, token: "scrape-me", in: dir)
            defer { prometheus.stop() }
            #expect(await Poll.until(timeout: .seconds(40), interval: .milliseconds(250)) {
                (try? prometheus.query(#"up{job="locgate"}"#)) == 1
            }, "Prometheus never scraped the API successfully")
            let series = #"locgate_component_emitted_positions_total{component="sources.gps",type="tcp"}"#
            let first = try #require(try prometheus.query(series))
            #expect(await Poll.until(timeout: .seconds(20), interval: .milliseconds(250)) {
                ((try? prometheus.query(series)) ?? 0) > first
            }, "the counter did not increase in Prometheus")
        }
    }
}

/// `prometheus` on a free loopback port scraping one target every second, with its storage in a
/// test directory.
final class PrometheusServer: Sendable {
    let port: Int
    private let process: Process

    init(scraping target: Int, token: String, in dir: String) throws {
        port = LoopbackTCPServer.freePort()
        let config = """
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        scrape_configs:
          - job_name: locgate
            scrape_interval: 1s
            scrape_timeout: 1s
            authorization:
              credentials: "\(token)"
            static_configs:
              - targets: ["127.0.0.1:\(target)"]
        """
        try config.write(toFile: "\(dir)/prometheus.yml", atomically: true, encoding: .utf8)
        process = try LocgateBinary.launch(["/usr/bin/prometheus", "--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/data",
                                            "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"],
                                           stderr: "\(dir)/prometheus.log")
    }

    /// The value of an instant query's first result, nil when there is none.
    func query(_ expression: String) throws -> Double? {
        let r = try Curl.run(["-G", "--data-urlencode", "query=\(expression)", "http://127.0.0.1:\(port)/api/v1/query"])
        guard r.status == 200 else { return nil }
        let json = try JSONValue.parse(string: r.body)
        guard let first = json.objectValue?["data"]?.objectValue?["result"]?.arrayValue?.first,
              let value = first.objectValue?["value"]?.arrayValue, value.count == 2, case .string(let text) = value[1] else { return nil }
        return Double(text)
    }

    /// SIGKILL: a child of the test process may inherit a mask that blocks SIGTERM.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
