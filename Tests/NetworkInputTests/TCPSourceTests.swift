import GatewayCore
import GatewayTesting
import NetworkInput
import Testing

/// Reads the `tcp` plugin's options from a JSON object, as the pipeline does.
func configureTCP(_ json: String, diagnostics: ConfigurationDiagnostics = ConfigurationDiagnostics()) throws -> TCPNMEAConfiguration {
    let o = try #require(try JSONValue.parse(string: json).objectValue)
    var reader = OptionReader(object: o, path: "sources.rx", diagnostics: diagnostics)
    reader.markKnown(["type"])
    let c = TCPNMEAPlugin.configure(&reader)
    reader.finish()
    return c
}

@Suite(.timeLimit(.minutes(3))) struct TCPSourceTests {
    func source(port: Int, _ extra: String = "") throws -> (ComponentContext) throws -> any PositionSource {
        let c = try configureTCP(#"{ "host": "127.0.0.1", "port": \#(port), "reconnect_initial": "50ms", "reconnect_max": "200ms"\#(extra) }"#)
        return { ctx in try TCPNMEAPlugin.makeSource(c, context: ctx) }
    }

    @Test func defaultsTheDeviceIdToHostAndPort() throws {
        let c = try configureTCP(#"{ "host": "gps.local", "port": 10110 }"#)
        #expect(c.device == "gps.local:10110")
        #expect(c.stallTimeout == .seconds(30))
    }

    @Test func reportsAMissingPortAndAnInvertedBackoffWithTheirPaths() throws {
        let d = ConfigurationDiagnostics()
        _ = try configureTCP(#"{ "host": "h", "reconnect_initial": "10s", "reconnect_max": "1s" }"#, diagnostics: d)
        #expect(d.problems.map(\.path) == ["sources.rx.port", "sources.rx.reconnect_max"])
    }

    @Test func decodesPositionsFromAServer() async throws {
        let server = LoopbackTCPServer { n in Array(NMEASamples.epoch(n).utf8) }
        try server.start()
        defer { server.stop() }
        let ctx = SourceConformance.makeContext()
        let collector = PositionCollector()
        let src = try source(port: server.port)(ctx)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            #expect(await collector.waitForCount(3))
            group.cancelAll()
        }
        let p = try #require(collector.positions.first)
        #expect(p.device == "127.0.0.1:\(server.port)")
        #expect(p.source == "under_test")
        #expect(p.latitude != nil)
        #expect(ctx.stats.value("tcp.connects") == 1)
    }

    @Test func rejoinsARestartedServer() async throws {
        let server = LoopbackTCPServer { n in Array(NMEASamples.epoch(n).utf8) }
        try server.start()
        defer { server.stop() }
        try await SourceConformance.checkReconnects(
            peerDown: { server.stop() },
            peerUp: { try server.start() },
            make: try source(port: server.port))
        #expect(server.connections >= 2)
    }

    @Test func keepsRetryingWhileNoServerListens() async throws {
        let port = LoopbackTCPServer.freePort()
        let server = LoopbackTCPServer(port: port) { n in Array(NMEASamples.epoch(n).utf8) }
        // The server appears only after the source has failed to connect a few times.
        var stats: ComponentStats?
        try await SourceConformance.checkReconnects(
            peerDown: {},
            peerUp: {},
            make: { ctx in
                stats = ctx.stats
                let s = try source(port: port)(ctx)
                return ScriptedStart(source: s, before: {
                    _ = await Poll.until { ctx.stats.value("tcp.connect_failures") >= 2 }
                    try? server.start()
                })
            })
        server.stop()
        // The server was started only after two failed attempts, so a position proves a retry.
        #expect((stats?.value("tcp.connect_failures") ?? 0) >= 2)
        #expect(server.connections == 1)
    }

    @Test func honoursCancellationWhileConnectedAndWhileWaiting() async throws {
        let server = LoopbackTCPServer { _ in [] }
        try server.start()
        defer { server.stop() }
        try await SourceConformance.checkCancellation(ready: { ctx, _ in ctx.stats.value("tcp.connects") == 1 }, make: try source(port: server.port))
        try await SourceConformance.checkCancellation(make: try source(port: LoopbackTCPServer.freePort()))
    }

    @Test func countsGarbageAndKeepsReading() async throws {
        let server = LoopbackTCPServer { n in
            n % 2 == 0 ? Array("$GPGGA,garbage*00\r\n\u{0}\u{1}\u{2}noise\n".utf8) : Array(NMEASamples.epoch(n).utf8)
        }
        try server.start()
        defer { server.stop() }
        let stats = try await SourceConformance.checkBadInputCounted(counters: ["nmea.rejected", "nmea.noise_bytes"], feedGarbage: {}, make: try source(port: server.port))
        #expect(stats.value("nmea.rejected") + stats.value("nmea.noise_bytes") > 0)
    }

    @Test func reconnectsAfterAStall() async throws {
        let server = LoopbackTCPServer { _ in [] }
        try server.start()
        defer { server.stop() }
        let ctx = SourceConformance.makeContext()
        let src = try source(port: server.port, #", "stall_timeout": "200ms""#)(ctx)
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: PositionCollector().output) }
            #expect(await Poll.until { ctx.stats.value("tcp.connects") >= 2 })
            group.cancelAll()
        }
        #expect(ctx.stats.value("tcp.stalls") >= 1)
    }
}

/// Runs `before` alongside a source, so a test can change the world once the source is running.
struct ScriptedStart: PositionSource {
    let source: any PositionSource
    let before: @Sendable () async -> Void

    func run(output: SourceOutput) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await before() }
            group.addTask { try await source.run(output: output) }
            try await group.waitForAll()
        }
    }
}
