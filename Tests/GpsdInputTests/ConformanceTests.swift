import GatewayCore
import GatewayTesting
import GpsdInput
import Testing

/// The source contract (``SourceConformance``) for the gpsd source, against a scripted gpsd on loopback.
@Suite(.timeLimit(.minutes(2))) struct GpsdSourceConformanceTests {
    /// A gpsd that sends its banner and one TPV (a new second each time) every 100 ms.
    static func gpsd(port: Int = 0) -> LoopbackTCPServer {
        LoopbackTCPServer(port: port) { n in
            let second = n % 60, minute = n / 60 % 60
            let time = "2024-05-01T10:\(minute < 10 ? "0" : "")\(minute):\(second < 10 ? "0" : "")\(second).000Z"
            return Array((FaultTests.version + #"{"class":"TPV","device":"/dev/fake","mode":3,"time":"\#(time)","lat":48.1,"lon":11.5}"# + "\r\n").utf8)
        }
    }

    static func make(port: Int) -> (ComponentContext) throws -> any PositionSource {
        { context in
            GpsdPositionSource(configuration: TestSupport.configuration(port: port) { $0.idleFlush = .milliseconds(200) }, context: context)
        }
    }

    @Test func itStopsWhenCancelledWhileConnectedAndWhileNoGpsdListens() async throws {
        let server = Self.gpsd()
        try server.start()
        defer { server.stop() }
        try await SourceConformance.checkCancellation(ready: { _, collector in collector.count >= 1 }, make: Self.make(port: server.port))
        try await SourceConformance.checkCancellation(make: Self.make(port: LoopbackTCPServer.freePort()))
    }

    @Test func badReportsAreCountedAndSkipped() async throws {
        let server = LoopbackTCPServer { n in Array((n == 0 ? FaultTests.version : "") .utf8) + Array("this is not json\r\n{\"class\":\"TPV\",\r\n".utf8) }
        try server.start()
        defer { server.stop() }
        let stats = try await SourceConformance.checkBadInputCounted(counters: ["gpsd.bad_json"], feedGarbage: {}, make: Self.make(port: server.port))
        #expect(stats.value("gpsd.bad_json") > 0)
    }

    @Test func itRejoinsARestartedGpsd() async throws {
        let server = Self.gpsd()
        try server.start()
        defer { server.stop() }
        try await SourceConformance.checkReconnects(peerDown: { server.stop() }, peerUp: { try server.start() }, make: Self.make(port: server.port))
        #expect(server.connections >= 2)
    }
}
