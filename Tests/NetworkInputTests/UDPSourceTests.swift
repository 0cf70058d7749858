import Foundation
import GatewayCore
import GatewayTesting
import NetworkInput
import Testing

@Suite(.timeLimit(.minutes(3))) struct UDPSourceTests {
    func configure(_ json: String) throws -> UDPNMEAConfiguration {
        try PluginOptions.valid(UDPNMEAPlugin.self, json)
    }

    @Test func namesEachSenderAsItsOwnDevice() async throws {
        let port = LoopbackTCPServer.freePort(udp: true)
        let c = try configure(#"{ "bind": "127.0.0.1", "port": \#(port) }"#)
        let ctx = SourceConformance.makeContext()
        let collector = PositionCollector()
        let src = try UDPNMEAPlugin.makeSource(c, context: ctx)
        let a = try LoopbackUDPSender(), b = try LoopbackUDPSender()
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            // Interleaved senders: each decoder sees only its own sentences.
            var ok = false
            for n in 0..<400 where !ok {
                a.send(Array(NMEASamples.epoch(n).utf8), to: port)
                b.send(Array(NMEASamples.epoch(n + 500).utf8), to: port)
                let devices = Set(collector.positions.compactMap(\.device))
                ok = devices.contains(a.address) && devices.contains(b.address)
                try? await Task.sleep(for: .milliseconds(50))
            }
            #expect(ok)
            group.cancelAll()
        }
        #expect(ctx.stats.value("udp.senders") == 2)
    }

    @Test func usesTheConfiguredDeviceForEverySender() async throws {
        let port = LoopbackTCPServer.freePort(udp: true)
        let c = try configure(#"{ "bind": "127.0.0.1", "port": \#(port), "device": "fleet" }"#)
        let ctx = SourceConformance.makeContext()
        let collector = PositionCollector()
        let src = try UDPNMEAPlugin.makeSource(c, context: ctx)
        let a = try LoopbackUDPSender()
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            for n in 0..<400 where collector.count < 2 {
                a.send(Array(NMEASamples.epoch(n).utf8), to: port)
                try? await Task.sleep(for: .milliseconds(50))
            }
            #expect(collector.count >= 2)
            group.cancelAll()
        }
        #expect(collector.positions.allSatisfy { $0.device == "fleet" })
    }

    /// A u-blox receiver bridged to UDP: UBX frames split over datagrams are joined per sender, and
    /// each epoch (NAV-PVT beside GGA and RMC) is one position from its NAV-PVT, RTK status included.
    @Test func readsUBXSplitOverDatagrams() async throws {
        let port = LoopbackTCPServer.freePort(udp: true)
        let c = try configure(#"{ "bind": "127.0.0.1", "port": \#(port), "device": "rover" }"#)
        let ctx = SourceConformance.makeContext()
        let collector = PositionCollector()
        let src = try UDPNMEAPlugin.makeSource(c, context: ctx)
        let a = try LoopbackUDPSender()
        let stream = try [UInt8](Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ReceiverStreamTests/Fixtures/synthetic/synthetic-rtk.ubx")))
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            // Until the socket is bound, datagrams are lost: knock with a noise byte until it counts one.
            #expect(await Poll.until {
                a.send([0], to: port)
                return ctx.stats.value("udp.datagrams") >= 1
            })
            // 100-byte datagrams cut every NAV-PVT (100 bytes with its header) somewhere inside.
            var offset = 0
            while offset < stream.count {
                a.send(Array(stream[offset..<min(offset + 100, stream.count)]), to: port)
                offset += 100
            }
            #expect(await Poll.until { collector.count >= 13 }, "\(collector.count) positions")
            group.cancelAll()
        }
        let all = collector.positions
        #expect(all.count == 13)
        #expect(all.map { $0.quality?.name ?? "-" }.prefix(4) == ["gps", "dgps", "rtk_float", "rtk_fixed"])
        #expect(all.allSatisfy { $0.speedError != nil && $0.device == "rover" })
        #expect(ctx.stats.value("ubx.frames") > 0 && ctx.stats.value("ubx.bad_checksum") == 0)
    }

    @Test func countsGarbageDatagramsAndHonoursCancellation() async throws {
        let port = LoopbackTCPServer.freePort(udp: true)
        let c = try configure(#"{ "bind": "127.0.0.1", "port": \#(port) }"#)
        let a = try LoopbackUDPSender()
        try await SourceConformance.checkBadInputCounted(counters: ["nmea.rejected", "nmea.noise_bytes"], feedGarbage: {
            for _ in 0..<20 {
                a.send(Array("$GPRMC,bad*00\r\n\u{0}\u{ff}".utf8), to: port)
                try await Task.sleep(for: .milliseconds(20))
            }
        }, make: { ctx in try UDPNMEAPlugin.makeSource(c, context: ctx) })
        try await SourceConformance.checkCancellation(make: { ctx in try UDPNMEAPlugin.makeSource(c, context: ctx) })
    }

    @Test func reportsABadPortAndAnUnknownKeyWithTheirPaths() throws {
        let (_, problems) = try PluginOptions.read(UDPNMEAPlugin.self, #"{ "type": "udp", "port": 70000, "bind_addr": "x" }"#)
        #expect(problems.map(\.path) == ["sources.under_test.port", "sources.under_test.bind_addr"])
    }

    @Test func claimsItsPort() throws {
        let c = try configure(#"{ "port": 10110 }"#)
        #expect(UDPNMEAPlugin.claims(of: c) == ["udp port 10110"])
    }
}
