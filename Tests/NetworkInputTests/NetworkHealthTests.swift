import GatewayCore
import GatewayTesting
import NetworkInput
import Testing

/// Receiver health (`health`) on the network sources, against real loopback peers: a silent
/// sender is reported `no_data`, its return `data_resumed`, in order with the positions.
@Suite(.timeLimit(.minutes(2))) struct NetworkHealthTests {
    static func events(_ positions: [Position], _ kind: PositionEvent.Kind, device: String) -> [Int] {
        positions.indices.filter { positions[$0].event?.kind == kind && positions[$0].deviceKey == device }
    }

    /// A tcp peer that pauses for 1.6 s between two runs of epochs: long enough past the idle
    /// flush (1 s) that the last epoch before the pause is out before data resumes, on a busy
    /// machine too (a pause of 1.1 s left 0.1 s for it).
    @Test func aTCPPeerThatPausesIsReportedSilentThenResumed() async throws {
        let server = LoopbackTCPServer { n in (10..<26).contains(n) ? [] : Array(NMEASamples.epoch(n).utf8) }
        try server.start()
        defer { server.stop() }
        let c = try configureTCP(#"{ "host": "127.0.0.1", "port": \#(server.port), "device": "rx", "health": { "data_timeout": "300ms" } }"#)
        let ctx = SourceConformance.makeContext()
        let collector = PositionCollector()
        let src = try TCPNMEAPlugin.makeSource(c, context: ctx)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            let resumed = await Poll.until(timeout: .seconds(20)) {
                !Self.events(collector.positions, .dataResumed, device: "rx").isEmpty
                    && collector.positions.contains { $0.time?.milliseconds ?? 0 > Self.epochTime(27) }
            }
            try #require(resumed)
            group.cancelAll()
        }
        let all = collector.positions
        let silent = try #require(Self.events(all, .noData, device: "rx").first)
        let back = try #require(Self.events(all, .dataResumed, device: "rx").first)
        #expect(Self.events(all, .noData, device: "rx").count == 1)
        #expect(silent < back)
        // Before the pause every fix precedes no_data; after it, data_resumed precedes every fix.
        let fixes = all.indices.filter { all[$0].event == nil }
        #expect(fixes.filter { $0 < silent }.allSatisfy { (all[$0].time?.milliseconds ?? 0) <= Self.epochTime(9) })
        #expect(fixes.filter { $0 > back }.allSatisfy { (all[$0].time?.milliseconds ?? 0) >= Self.epochTime(26) })
        #expect(ctx.stats.value("health.no_data") == 1)
    }

    /// Two udp senders: one keeps sending while the other falls silent and returns. The returning
    /// sender's data_resumed comes after the positions of datagrams that arrived before it, even
    /// when the source reads both datagrams in one wake-up.
    @Test func aUDPSenderThatReturnsIsResumedInOrderWithTheOthersPositions() async throws {
        let port = LoopbackTCPServer.freePort(udp: true)
        let c = try PluginOptions.valid(UDPNMEAPlugin.self, #"{ "bind": "127.0.0.1", "port": \#(port), "health": { "data_timeout": "300ms" } }"#)
        let ctx = SourceConformance.makeContext()
        let collector = PositionCollector()
        let src = try UDPNMEAPlugin.makeSource(c, context: ctx)
        let steady = try LoopbackUDPSender(), quiet = try LoopbackUDPSender()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await src.run(output: collector.output) }
            // Both send until both are known, then `quiet` stops until it is reported silent.
            var n = 0
            let known = await Poll.until(timeout: .seconds(20), interval: .milliseconds(50)) {
                steady.send(Array(NMEASamples.epoch(n).utf8), to: port)
                quiet.send(Array(NMEASamples.epoch(n + 500).utf8), to: port)
                n += 1
                return Set(collector.positions.compactMap(\.device)) == [steady.address, quiet.address]
            }
            try #require(known)
            let silent = await Poll.until(timeout: .seconds(20), interval: .milliseconds(50)) {
                steady.send(Array(NMEASamples.epoch(n).utf8), to: port)
                n += 1
                return !Self.events(collector.positions, .noData, device: quiet.address).isEmpty
            }
            try #require(silent)
            // Back to back: two whole epochs from `steady` (the first is complete once the second
            // starts), then `quiet` again.
            let marker = n + 100
            steady.send(Array((NMEASamples.epoch(marker) + NMEASamples.epoch(marker + 1)).utf8), to: port)
            quiet.send(Array(NMEASamples.epoch(700).utf8), to: port)
            let resumed = await Poll.until(timeout: .seconds(20)) {
                !Self.events(collector.positions, .dataResumed, device: quiet.address).isEmpty
            }
            try #require(resumed)
            group.cancelAll()
            let all = collector.positions
            let back = try #require(Self.events(all, .dataResumed, device: quiet.address).first)
            let steadyFix = try #require(all.firstIndex { $0.device == steady.address && $0.time?.milliseconds == Self.epochTime(marker) })
            #expect(steadyFix < back, "the position sent before the silent sender returned came after its data_resumed")
            #expect(Self.events(all, .noData, device: steady.address).isEmpty)
        }
    }

    /// The time `NMEASamples.epoch(n)` carries, in epoch milliseconds.
    static func epochTime(_ n: Int) -> Int64 {
        Timestamp(year: 2026, month: 3, day: 1, hour: 12 + (n / 3600) % 12, minute: (n / 60) % 60, second: n % 60).milliseconds
    }
}
