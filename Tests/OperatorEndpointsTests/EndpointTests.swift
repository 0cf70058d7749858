import Foundation
import GatewayCore
import GatewayTesting
import OperatorEndpoints
import HTTPServing
import Testing

/// The API over a running pipeline, asked by curl.
@Suite struct EndpointTests {
    func tcpPipeline(peer: Int, output: String, api: String = #"{"listen": "127.0.0.1:$API_PORT"}"#, sinks: String? = nil) -> String {
        """
        { "settings": { "stats_interval": false, "shutdown_timeout": "2s" },
          "api": \(api),
          "sources": { "gps": { "type": "tcp", "host": "127.0.0.1", "port": \(peer), "device": "boat-1",
                                "reconnect_initial": "100ms", "reconnect_max": "200ms" } },
          "sinks": \(sinks ?? #"{ "out": { "type": "file", "inputs": ["gps"], "path": "\#(output)" } }"#) }
        """
    }

    @Test(.timeLimit(.minutes(1)))
    func metricsExposeEveryComponentStatisticAndPassPromtool() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("metrics")
        // An http sink whose server is down: its queue grows, so queue gauges and retries show.
        let sinks = """
        { "out": { "type": "file", "inputs": ["gps"], "path": "\(dir)/out.jsonl" },
          "upload": { "type": "http", "inputs": ["gps"], "url": "http://127.0.0.1:\(LoopbackTCPServer.freePort())/track", "queue": null,
                      "batch": { "interval": "100ms" }, "retry": { "initial": "100ms", "max": "200ms" } } }
        """
        try await APIHarness.run(tcpPipeline(peer: peer.port, output: "", sinks: sinks)) { h in
            #expect(await Poll.until { (h.stats("sinks.upload")?.value("http.retried") ?? 0) > 0 && (h.stats("sinks.out")?.emitted ?? 0) >= 5 })
            let r = try h.get("/metrics")
            #expect(r.status == 200)
            #expect(r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
            let page = r.body
            let emitted = sample(page, #"locgate_component_emitted_positions_total{component="sources.gps",type="tcp"}"#) ?? 0
            #expect(emitted >= 5)
            #expect((sample(page, #"locgate_component_received_positions_total{component="sinks.out",type="file"}"#) ?? 0) >= 5)
            #expect(sample(page, #"locgate_component_received_positions_total{component="sources.gps",type="tcp"}"#) == nil, "sources receive nothing")
            #expect(sample(page, #"locgate_tcp_connects_total{component="sources.gps",type="tcp"}"#) == 1)
            #expect((sample(page, #"locgate_nmea_accepted_total{component="sources.gps",type="tcp"}"#) ?? 0) > 0)
            #expect((sample(page, #"locgate_queue_depth{component="sinks.upload",type="http"}"#) ?? 0) > 0)
            #expect(sample(page, #"locgate_queue_oldest_age_seconds{component="sinks.upload",type="http"}"#) != nil)
            #expect((sample(page, #"locgate_http_retried_total{component="sinks.upload",type="http"}"#) ?? 0) > 0)
            #expect((sample(page, #"locgate_device_last_fix_age_seconds{device="boat-1"}"#) ?? -1) >= 0)
            #expect(sample(page, #"locgate_build_info{version="test"}"#) == 1)
            #expect(page.contains("# TYPE locgate_nmea_accepted_total counter\n"))
            #expect(page.contains("# TYPE locgate_queue_depth gauge\n"))
            #expect(page.contains("# TYPE locgate_file_bytes gauge\n"))
            // One TYPE line per family.
            let types = page.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
            #expect(Set(types).count == types.count)

            let check = Process()
            check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            check.arguments = ["promtool", "check", "metrics"]
            let input = Pipe(), output = Pipe()
            check.standardInput = input
            check.standardOutput = output
            check.standardError = output
            try check.run()
            input.fileHandleForWriting.write(Data(page.utf8))
            try input.fileHandleForWriting.close()
            let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            check.waitUntilExit()
            #expect(check.terminationStatus == 0, "promtool: \(said)")
            #expect(said.isEmpty, "promtool has remarks: \(said)")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func healthFailsWhileTheSourcesPeerIsSilentAndRecovers() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("health")
        let json = tcpPipeline(peer: peer.port, output: "\(dir)/out.jsonl",
                               api: #"{"listen": "127.0.0.1:$API_PORT", "health": {"source_stall": "1s"}}"#)
        try await APIHarness.run(json) { h in
            #expect(await Poll.until { (try? h.get("/health"))?.status == 200 })
            let ok = try h.get("/health")
            #expect(ok.body == "{\"status\":\"ok\"}\n")
            // The source delivered before its peer goes away (health is ok before the first
            // position too, within source_stall of the start).
            #expect(await Poll.until { (h.stats("sources.gps")?.emitted ?? 0) > 0 })
            peer.stop()
            #expect(await Poll.until(timeout: .seconds(15)) { h.status("/health") == 503 })
            let unhealthy = try h.get("/health")
            #expect(unhealthy.headers["content-type"] == "application/json")
            #expect(unhealthy.body.hasPrefix(#"{"status":"unhealthy","problems":[{"component":"sources.gps","reason":"no position for "#), "\(unhealthy.body)")
            #expect(unhealthy.body.contains("(health.source_stall is 1s)"))
            try peer.start()
            #expect(await Poll.until(timeout: .seconds(15)) { (try? h.get("/health"))?.status == 200 })
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func healthFailsWhenASinksQueueGetsOld() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let sinks = """
        { "upload": { "type": "http", "inputs": ["gps"], "url": "http://127.0.0.1:\(LoopbackTCPServer.freePort())/track", "queue": null,
                      "batch": { "interval": "100ms" }, "retry": { "initial": "100ms", "max": "200ms" } } }
        """
        let json = tcpPipeline(peer: peer.port, output: "", api: #"{"listen": "127.0.0.1:$API_PORT", "health": {"max_queue_age": "2s"}}"#, sinks: sinks)
        try await APIHarness.run(json) { h in
            #expect(h.status("/health") == 200)
            #expect(await Poll.until(timeout: .seconds(15)) { h.status("/health") == 503 })
            let body = try h.get("/health").body
            #expect(body.contains(#"{"component":"sinks.upload","reason":"oldest queued position is "#), "\(body)")
            #expect(body.contains("(health.max_queue_age is 2s)"))
            #expect(!body.contains("sources.gps"))
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func latestPositionsHoldTheNewestFixPerDevice() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("latest")
        try await APIHarness.run(tcpPipeline(peer: peer.port, output: "\(dir)/out.jsonl")) { h in
            #expect(await Poll.until { (h.stats("sinks.out")?.emitted ?? 0) >= 3 })
            let r = try h.get("/positions/latest")
            #expect(r.status == 200)
            #expect(r.headers["content-type"] == "application/json")
            let value = try JSONValue.parse(string: r.body)
            let positions = try #require(value.objectValue?["positions"]?.arrayValue)
            #expect(positions.count == 1)
            #expect(positions.first?.objectValue?["device"] == .string("boat-1"))
            #expect(positions.first?.objectValue?["lat"]?.numberValue != nil)
            #expect(positions.first?.objectValue?["class"] == .string("TPV"))
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func unknownPathsAre404AndOtherMethods405() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("methods")
        let bigFile = "\(dir)/big.txt"
        try String(repeating: "A", count: 200_000).write(toFile: bigFile, atomically: true, encoding: .utf8)
        try await APIHarness.run(tcpPipeline(peer: peer.port, output: "\(dir)/out.jsonl")) { h in
            let missing = try h.get("/metrics/extra")
            #expect(missing.status == 404)
            #expect(h.status("/map") == 404)
            for method in ["POST", "PUT", "DELETE", "PATCH"] {
                let r = try h.get("/metrics", ["-X", method, "--data", "x=1"])
                #expect(r.status == 405, "\(method)")
                #expect(r.headers["allow"] == "GET, HEAD")
            }
            let head = try h.get("/health", ["-I"])
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            // A large body is skipped, and the server keeps answering.
            let big = try h.get("/health", ["-X", "POST", "--data-binary", "@\(bigFile)"])
            #expect(big.status == 405)
            #expect(h.status("/health") == 200)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aTokenIsRequiredWhenConfigured() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("token")
        let json = tcpPipeline(peer: peer.port, output: "\(dir)/out.jsonl", api: #"{"listen": "127.0.0.1:$API_PORT", "token": "${API_TOKEN}"}"#)
        try await APIHarness.run(json, environment: ["API_TOKEN": "s3cret-token"]) { h in
            for (path, extra) in [("/metrics", []), ("/health", ["-H", "Authorization: Bearer wrong-token!"]),
                                  ("/positions/latest", ["-H", "Authorization: Bearer s3cret-toke"]),
                                  ("/nope", ["-H", "Authorization: Basic czNjcmV0LXRva2Vu"])] {
                let r = try h.get(path, extra)
                #expect(r.status == 401, "\(path) \(extra)")
                #expect(r.headers["www-authenticate"] == #"Bearer realm="locgate""#)
                #expect(!r.body.contains("s3cret"))
            }
            #expect(h.status("/metrics", ["-H", "Authorization: Bearer s3cret-token"]) == 200)
            #expect(h.status("/health", ["-H", "authorization: bearer s3cret-token"]) == 200)
            #expect(h.status("/nope", ["-H", "Authorization: Bearer s3cret-token"]) == 404)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func tlsServesHTTPSWithTheConfiguredCertificate() async throws {
        #expect(HTTPServer.supportsTLS, "Debian's libmicrohttpd is built with GnuTLS")
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("tls")
        let certs = try TestCertificates(in: dir)
        let json = tcpPipeline(peer: peer.port, output: "\(dir)/out.jsonl",
                               api: #"{"listen": "127.0.0.1:$API_PORT", "tls": {"cert_file": "\#(certs.serverCert)", "key_file": "\#(certs.serverKey)"}}"#)
        let ca = certs.ca, otherCA = certs.otherCA
        try await APIHarness.run(json) { h in
            let secure = try Curl.run(["--cacert", ca, "https://127.0.0.1:\(h.port)/health"])
            #expect(secure.status == 200, "curl exit \(secure.curlExit): \(secure.body)")
            let wrongCA = try Curl.run(["--cacert", otherCA, "https://127.0.0.1:\(h.port)/health"])
            #expect(wrongCA.status == 0)
            let plain = try h.get("/health")
            #expect(plain.status != 200)
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aThousandParallelConnectionsDoNotStopThePipeline() async throws {
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("flood")
        try await APIHarness.run(tcpPipeline(peer: peer.port, output: "\(dir)/out.jsonl")) { h in
            #expect(await Poll.until { (h.stats("sinks.out")?.emitted ?? 0) > 0 })
            let flood = Process()
            flood.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            flood.arguments = ["python3", "\(packageRoot)/Tests/OperatorEndpointsTests/Support/flood.py", String(h.port), "1000"]
            let control = Pipe(), report = Pipe()
            flood.standardInput = control
            flood.standardOutput = report
            try flood.run()
            defer { if flood.isRunning { kill(flood.processIdentifier, SIGKILL) } }
            // The flood holds every connection open until its stdin closes.
            let opened = readLine(report.fileHandleForReading)
            #expect(opened == "OPEN 1000", "\(opened)")
            let before = h.stats("sinks.out")?.emitted ?? 0
            #expect(await Poll.until { (h.stats("sinks.out")?.emitted ?? 0) >= before + 5 }, "positions stopped flowing")
            try control.fileHandleForWriting.close()
            let summary = readLine(report.fileHandleForReading)
            flood.waitUntilExit()
            let answered = summary.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            #expect(summary.hasPrefix("DONE "), "\(summary)")
            #expect(answered > 0, "no request was answered during the flood: \(summary)")
            #expect(await Poll.until { (try? h.get("/metrics"))?.status == 200 })
            let after = h.stats("sinks.out")?.emitted ?? 0
            #expect(await Poll.until { (h.stats("sinks.out")?.emitted ?? 0) > after })
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aThousandSlowClientsDoNotKeepHealthFromAnswering() async throws {
        // Each connection is a descriptor of this process (the API serves in it).
        let limit = raiseOpenFileLimit(to: 4096)
        #expect(limit.soft >= 2048, "RLIMIT_NOFILE is \(limit.soft) (hard \(limit.hard)): 1,000 connections need more; raise the hard limit (ulimit -Hn)")
        let peer = try nmeaServer()
        defer { peer.stop() }
        let dir = try temporaryDirectory("slowloris")
        try await APIHarness.run(tcpPipeline(peer: peer.port, output: "\(dir)/out.jsonl")) { h in
            let slow = Process()
            slow.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // One byte of a request line every 2 s: never idle for the 10 s timeout, never complete.
            slow.arguments = ["python3", "\(packageRoot)/Tests/OperatorEndpointsTests/Support/slowloris.py", String(h.port), "1000", "2"]
            let control = Pipe(), report = Pipe()
            slow.standardInput = control
            slow.standardOutput = report
            try slow.run()
            defer { if slow.isRunning { kill(slow.processIdentifier, SIGKILL) } }
            let opened = readLine(report.fileHandleForReading)
            #expect(opened == "OPEN 1000", "\(opened)")
            #expect(await Poll.until { (h.api.serverStatistics?.open ?? 0) >= 1000 }, "\(String(describing: h.api.serverStatistics))")
            // Health is answered, again and again, while all of them hold their connections.
            for _ in 0..<20 {
                let r = try Curl.run(["-m", "3", "http://127.0.0.1:\(h.port)/health"])
                #expect(r.status == 200, "curl exit \(r.curlExit)")
            }
            let during = try #require(h.api.serverStatistics)
            #expect(during.open >= 1000 && during.deadlineClosed == 0 && during.refusedLimit == 0, "\(during)")
            // The request deadline (15 s) then cuts every one of them off.
            #expect(await Poll.until(timeout: .seconds(30)) { (h.api.serverStatistics?.deadlineClosed ?? 0) >= 1000 },
                    "\(String(describing: h.api.serverStatistics))")
            let page = try h.get("/metrics").body
            #expect(sample(page, #"locgate_api_connections_refused_total{reason="deadline"}"#) == 1000)
            try control.fileHandleForWriting.close()
            let summary = readLine(report.fileHandleForReading)
            slow.waitUntilExit()
            #expect(summary == "DONE 1000", "the server closed them all: \(summary)")
        }
    }

    func readLine(_ handle: FileHandle) -> String {
        var line: [UInt8] = []
        while let byte = try? handle.read(upToCount: 1)?.first, byte != 10 { line.append(byte) }
        return String(decoding: line, as: UTF8.self)
    }
}
