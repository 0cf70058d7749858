import GatewayCore
import GatewayTesting
import NetworkInput
import Testing

@Suite(.timeLimit(.minutes(1))) struct TCPListenTests {
    /// Starts a `tcp` source in listen mode on a free port; returns it with its port and context.
    func start(_ extra: String = "", collector: PositionCollector) async throws -> (Task<Void, any Error>, Int, ComponentContext) {
        let port = LoopbackTCPServer.freePort()
        let c = try configureTCP(#"{ "listen": "127.0.0.1:\#(port)"\#(extra) }"#)
        let ctx = SourceConformance.makeContext(id: "pushed")
        let src = try TCPNMEAPlugin.makeSource(c, context: ctx)
        let task = Task { try await src.run(output: collector.output) }
        #expect(await Poll.until { (try? LoopbackTCPClient(port: port)) != nil })
        return (task, port, ctx)
    }

    @Test func namesADeviceByItsAddressAndNumbersItsFixesByDeviceAndTime() async throws {
        let collector = PositionCollector()
        let (task, port, ctx) = try await start(collector: collector)
        let phone = try LoopbackTCPClient(port: port)
        phone.send((0..<3).map { NMEASamples.epoch($0) }.joined())
        // The third epoch is complete only after a quiet second (or the next epoch).
        #expect(await collector.waitForCount(3))
        let p = try #require(collector.positions.first)
        #expect(p.device == "127.0.0.1")
        #expect(p.source == "pushed")
        #expect(p.id == "pushed-127.0.0.1-\(try #require(p.time).milliseconds)")
        #expect(p.latitude != nil)
        #expect(ctx.stats.value("nmea.accepted") == 6)
        task.cancel()
        _ = await task.result
    }

    @Test func takesTheDeviceFromAHelloLineAndRefusesOnesNotListed() async throws {
        let collector = PositionCollector()
        let (task, port, ctx) = try await start(#", "device_from": "hello", "devices": { "boat-7": "Seven" }"#, collector: collector)
        let boat = try LoopbackTCPClient(port: port)
        boat.send("boat-7\r\n" + NMEASamples.epoch(1) + NMEASamples.epoch(2))
        #expect(await collector.waitForCount(2))
        #expect(collector.positions.allSatisfy { $0.device == "Seven" })
        let stranger = try LoopbackTCPClient(port: port)
        stranger.send("boat-9\n" + NMEASamples.epoch(3))
        #expect(stranger.waitForClose())
        #expect(ctx.stats.value("devices.unknown") == 1)
        let silent = try LoopbackTCPClient(port: port)
        silent.send(String(repeating: "x", count: 300))
        #expect(silent.waitForClose())
        #expect(ctx.stats.value("frames.bad.too_large") == 1)
        task.cancel()
        _ = await task.result
        #expect(collector.positions.allSatisfy { $0.device == "Seven" })
    }

    @Test func reportsOptionsOfTheOtherModeWithTheirPaths() throws {
        let d = ConfigurationDiagnostics()
        _ = try configureTCP(#"{ "listen": "127.0.0.1:10110", "host": "h", "stall_timeout": "5s" }"#, diagnostics: d)
        #expect(d.problems.map(\.path) == ["sources.rx.host", "sources.rx.stall_timeout"])
        let e = ConfigurationDiagnostics()
        _ = try configureTCP(#"{ "host": "h", "port": 1, "max_connections": 5 }"#, diagnostics: e)
        #expect(e.problems.map(\.path) == ["sources.rx.max_connections"])
        let f = ConfigurationDiagnostics()
        _ = try configureTCP(#"{ "listen": "nowhere:1", "unknown_devices": "reject" }"#, diagnostics: f)
        #expect(f.problems.map(\.path) == ["sources.rx.listen", "sources.rx.unknown_devices"])
    }

    @Test func claimsItsPortInListenMode() throws {
        #expect(TCPNMEAPlugin.claims(of: try configureTCP(#"{ "listen": "0.0.0.0:10110" }"#)) == ["tcp port 10110"])
        #expect(TCPNMEAPlugin.claims(of: try configureTCP(#"{ "host": "h", "port": 10110 }"#)).isEmpty)
    }
}
