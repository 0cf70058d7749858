import Foundation
import GatewayCore
@testable import GpsdInput
import GatewayTesting
import Testing

/// Faults a real gpsd does not produce on demand, from a scripted peer on loopback.
@Suite(.timeLimit(.minutes(3))) struct FaultTests {
    static func tpv(_ second: Int, device: String = "/dev/fake") -> String {
        #"{"class":"TPV","device":"\#(device)","mode":3,"time":"2024-05-01T10:00:\#(String(format: "%02d", second)).000Z","lat":48.1,"lon":11.5,"altMSL":520.5,"speed":1.5,"track":90.0,"eph":3.2}"# + "\r\n"
    }

    static let version = #"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"# + "\r\n"

    @Test func malformedAndOverLongLinesAreCountedAndSkipped() async throws {
        let script: @Sendable (Int) -> [UInt8] = { _ in
            var text = Self.version
            text += "this is not json\r\n"
            text += #"{"class":"TPV","mode":3,"#
            text += "\r\n"
            text += String(repeating: "x", count: 100_000) + "\r\n"   // over the 64 KB cap
            text += #"{"class":"SKY","device":"/dev/fake","uSat":8,"hdop":0.9,"vdop":1.4,"pdop":1.7}"# + "\r\n"
            text += Self.tpv(1) + Self.tpv(1) + Self.tpv(2)
            return Array(text.utf8)
        }
        let server = FakeGpsd(script: script)
        defer { server.stop() }
        let collector = PositionCollector()
        let logs = RecordingLogHandler(minimumLevel: .debug)
        let context = TestSupport.context(logs: logs)
        let source = GpsdPositionSource(configuration: TestSupport.configuration(port: server.port) { $0.device = "/dev/fake" }, context: context)
        try await TestSupport.running(source, into: collector) {
            // The second epoch is released by the idle flush.
            #expect(await Poll.until(timeout: .seconds(60)) { collector.count >= 2 })
        }
        let ours = collector.positions
        #expect(ours.count == 2)
        #expect(ours.first?.satellites == 8 && ours.first?.hdop == 0.9)
        #expect(ours.first?.latitude == 48.1 && ours.first?.altitude == 520.5 && ours.first?.horizontalError == 3.2)
        #expect(ours.map(\.id) == ["gps-/dev/fake-1714557601000", "gps-/dev/fake-1714557602000"])
        #expect(context.stats.value("gpsd.bad_json") == 2)
        #expect(context.stats.value("gpsd.too_long") == 1)
        #expect(!logs.entries(containing: "skipped a line from gpsd").isEmpty)
        #expect(server.received.contains(#"?WATCH={"enable":true,"json":true,"device":"/dev/fake"}"#))
    }

    @Test func aSilentGpsdIsLeftAfterTheStallTimeout() async throws {
        let server = FakeGpsd { _ in Array(Self.version.utf8) }
        defer { server.stop() }
        let logs = RecordingLogHandler(minimumLevel: .debug)
        let context = TestSupport.context(logs: logs)
        let config = TestSupport.configuration(port: server.port) { $0.stallTimeout = .milliseconds(600); $0.idleFlush = .milliseconds(100) }
        let source = GpsdPositionSource(configuration: config, context: context)
        let reconnected = try await TestSupport.running(source, into: PositionCollector()) {
            await Poll.until(timeout: .seconds(60)) { server.connections >= 3 }
        }
        #expect(reconnected)
        #expect(!logs.entries(containing: "no data for 600ms").isEmpty)
    }

    @Test func aDroppedConnectionIsRejoinedAndTheOpenEpochIsKept() async throws {
        // Each connection sends two epochs and closes; the next one carries on in time.
        let server = FakeGpsd(closeAfterSend: true) { n in Array((Self.version + Self.tpv(2 * n) + Self.tpv(2 * n + 1)).utf8) }
        defer { server.stop() }
        let collector = PositionCollector()
        let logs = RecordingLogHandler(minimumLevel: .debug)
        let context = TestSupport.context(logs: logs)
        let source = GpsdPositionSource(configuration: TestSupport.configuration(port: server.port), context: context)
        try await TestSupport.running(source, into: collector) {
            #expect(await Poll.until(timeout: .seconds(60)) { collector.count >= 6 })
        }
        let seconds = collector.positions.compactMap { $0.time.map { Int(($0.milliseconds / 1000) % 60) } }
        #expect(Array(seconds.prefix(6)) == [2, 3, 4, 5, 6, 7])
        #expect(!logs.entries(containing: "gpsd closed the connection").isEmpty)
    }

    @Test func nmeaModeAsksForNMEA() async throws {
        let server = FakeGpsd { _ in Array(Self.version.utf8) }
        defer { server.stop() }
        let source = GpsdPositionSource(configuration: TestSupport.configuration(port: server.port) { $0.mode = .nmea }, context: TestSupport.context())
        try await TestSupport.running(source, into: PositionCollector()) {
            #expect(await Poll.until(timeout: .seconds(60)) { server.received.contains("\n") })
        }
        #expect(server.received == "?WATCH={\"enable\":true,\"nmea\":true};\n")
    }

    @Test func cancellationEndsTheSourceWhileItWaitsForData() async throws {
        let server = FakeGpsd { _ in Array(Self.version.utf8) }
        defer { server.stop() }
        let source = GpsdPositionSource(configuration: TestSupport.configuration(port: server.port), context: TestSupport.context())
        // `running` cancels the source and waits for it to return: this test ends only if it does.
        try await TestSupport.running(source, into: PositionCollector()) {
            #expect(await Poll.until(timeout: .seconds(60)) { server.connections >= 1 })
        }
    }
}
