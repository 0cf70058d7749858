import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import HTTPOutput
import DeliveryEngine
import Synchronization
import Testing

/// Runs an http sink in process with a recording log until `done` holds, then cancels it.
func runUntil(_ config: HTTPSinkConfiguration, feed: [Position], log: RecordingLogHandler,
              _ done: @escaping @Sendable () -> Bool) async throws -> (depth: Int, stats: ComponentStats) {
    let stats = ComponentStats(id: "up")
    let context = ComponentContext(id: "up", kind: .sink, logger: log.logger(label: "sinks.up"), stats: stats)
    let outbox = try OutboxOptions.open(config.queue, context: context)
    let sink = HTTPSink(configuration: config, context: context, outbox: outbox)
    let buffer = SinkBuffer(capacity: 100_000, policy: .block, durable: true, stats: stats)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await sink.run(input: buffer) }
        await buffer.send(feed)
        _ = await Poll.until(timeout: .seconds(30)) { done() }
        group.cancelAll()
        do { try await group.waitForAll() } catch is CancellationError {}
    }
    return (outbox.depth, stats)
}

@Suite(.serialized, .timeLimit(.minutes(2)))
struct TransportTests {
    func tlsConfig(_ url: String, _ dir: String, tls: String, extra: String = "") throws -> HTTPSinkConfiguration {
        try configuration(#"{"url":"\#(url)","tls":\#(tls),"batch":{"max_positions":50,"interval":"50ms"},"retry":{"initial":"50ms","max":"200ms"},"queue":{"path":"\#(dir)/q.sqlite"}\#(extra)}"#)
    }

    @Test func deliversOverMutualTLSWithAPrivateCA() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = try TestCertificates(in: dir)
        let receiver = try Receiver(directory: dir, arguments: ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey, "--tls-client-ca", certs.ca])
        defer { receiver.stop() }
        let config = try tlsConfig(receiver.httpsURL, dir, tls: #"{"ca_file":"\#(certs.ca)","cert_file":"\#(certs.clientCert)","key_file":"\#(certs.clientKey)"}"#)
        let harness = try Harness(config)
        try await harness.run { buffer in await buffer.send(positions(0..<120)) }
        #expect(receiver.accepted().flatMap(\.ids) == positions(0..<120).map(\.id))
    }

    @Test func anUntrustedServerIsAClearErrorAndTheBatchStaysQueued() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = try TestCertificates(in: dir)
        let receiver = try Receiver(directory: dir, arguments: ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey])
        defer { receiver.stop() }
        let log = RecordingLogHandler()
        let config = try tlsConfig(receiver.httpsURL, dir, tls: #"{"ca_file":"\#(certs.otherCA)"}"#)
        let (depth, _) = try await runUntil(config, feed: positions(0..<30), log: log) {
            !log.entries(level: .warning, containing: "not delivered").isEmpty
        }
        let warning = try #require(log.entries(level: .warning, containing: "not delivered").first)
        #expect(warning.message.contains("SSL certificate problem"), "\(warning)")
        #expect(depth == 30)
        #expect(!log.entries(level: .warning, containing: "30 position(s) stay queued in \(dir)/q.sqlite for the next start").isEmpty)
        #expect(receiver.accepted().isEmpty)
    }

    @Test func aServerThatRequiresAClientCertificateRefusesOneWithout() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = try TestCertificates(in: dir)
        let receiver = try Receiver(directory: dir, arguments: ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey, "--tls-client-ca", certs.ca])
        defer { receiver.stop() }
        let log = RecordingLogHandler()
        let config = try tlsConfig(receiver.httpsURL, dir, tls: #"{"ca_file":"\#(certs.ca)"}"#)
        let (depth, _) = try await runUntil(config, feed: positions(0..<10), log: log) {
            !log.entries(level: .warning, containing: "not delivered").isEmpty
        }
        #expect(depth == 10)
        #expect(receiver.accepted().isEmpty)
    }

    /// The process exits right after the sinks return: libcurl's thread must be done by then.
    /// A thread still freeing its handles during exit corrupted the heap once in about 20 runs
    /// of HangingServerTests (SIGABRT after "pipeline: stopped").
    @Test func aCancelledSinkReturnsOnlyOnceLibcurlsThreadIsDone() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Accepts and never answers: the request is in flight when the sink is cancelled.
        let silent = LoopbackTCPServer(interval: .seconds(60)) { _ in [] }
        try silent.start()
        defer { silent.stop() }
        // The thread takes its time to free its handles: the sink must wait for it all the same.
        HTTPTransport.cleanupPauseForTests.store(200, ordering: .relaxed)
        defer { HTTPTransport.cleanupPauseForTests.store(0, ordering: .relaxed) }
        for run in 0..<5 {
            let config = try configuration(#"{"url":"http://127.0.0.1:\#(silent.port)/track","batch":{"max_positions":1,"interval":"10ms"},"queue":{"path":"\#(dir)/q\#(run).sqlite"}}"#)
            let before = silent.connections
            let (depth, _) = try await runUntil(config, feed: positions(0..<1), log: RecordingLogHandler()) { silent.connections > before }
            #expect(depth == 1)
            #expect(HTTPTransport.runningThreads.load(ordering: .relaxed) == 0)
        }
    }

    @Test func aMissingCAFileIsAnErrorAtStart() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = try tlsConfig("https://127.0.0.1:1/x", dir, tls: #"{"ca_file":"\#(dir)/nope.pem"}"#)
        #expect { _ = try Harness(config) } throws: { error in
            "\(error)" == "tls.ca_file \(dir)/nope.pem: No such file or directory"
        }
    }

    @Test func goesThroughTheConfiguredProxy() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certs = try TestCertificates(in: dir)
        let receiver = try Receiver(directory: dir, arguments: ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey])
        defer { receiver.stop() }
        let proxy = try Receiver(directory: dir, name: "proxy.log", script: "connect_proxy.py")
        defer { proxy.stop() }
        let config = try tlsConfig(receiver.httpsURL, dir, tls: #"{"ca_file":"\#(certs.ca)"}"#, extra: #","proxy":"http://127.0.0.1:\#(proxy.port)""#)
        let harness = try Harness(config)
        try await harness.run { buffer in await buffer.send(positions(0..<60)) }
        #expect(receiver.accepted().flatMap(\.ids) == positions(0..<60).map(\.id))
        #expect(proxy.proxiedLines().first == "CONNECT 127.0.0.1:\(receiver.port) HTTP/1.1")
    }

    @Test func badProxyAndTLSOptionsAreConfigurationErrors() throws {
        let (_, problems) = try configure(#"{"url":"https://x","queue":null,"proxy":"ftp://p:1","tls":{"cert_file":"c.pem","verify":"no"}}"#)
        #expect(problems.contains { $0.hasPrefix("sinks.up.proxy: expected a URL starting with http://") })
        #expect(problems.contains { $0.hasPrefix("sinks.up.tls.key_file: required with cert_file") })
        #expect(problems.contains { $0.hasPrefix("sinks.up.tls.verify:") })
    }
}
