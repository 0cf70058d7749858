import Foundation
import GatewayCore
import NMEA
import PositionEncoding
import Testing

/// Inputs the NMEA fuzz target (Fuzz/NMEA) found that broke the decoder's contract, each kept in
/// Fixtures/fuzz with the target's two leading bytes (read plan, options).
@Suite struct FuzzRegressionTests {
    static func input(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: Bundle.module.resourceURL!.appendingPathComponent("Fixtures/fuzz/\(name)")))
    }

    /// `crash-578f45c0`: sentences without checksums (options byte 0x41) in which a GGA's
    /// satellite count read 1328248. The position went out with `"uSat":1328248`, which no
    /// reader of locgate's JSON (file replay, mqtt, nats, exec) takes back: a count is at most
    /// ``Position/maximumSatellites``, and a sentence claiming more is invalid.
    @Test func aSatelliteCountNoReceiverReportsMakesTheSentenceInvalid() throws {
        let bytes = try Self.input("crash-578f45c0457452a69f7b36160bbca94a34c9033a")
        var options = NMEAOptions()
        options.requireChecksum = false
        let (positions, statistics) = TestSupport.decode(Array(bytes.dropFirst(2)), options: options)
        for p in positions {
            #expect((p.satellites ?? 0) <= Position.maximumSatellites, "\(p)")
            let line = PositionJSON.string(p)
            #expect(throws: Never.self) { _ = try PositionJSON.decode(JSONValue.parse(string: line), source: "fuzz") { _ in "x" } }
        }
        #expect(statistics.badField > 0)

        let gga = Array("$GPGGA,123519,4807.038,N,01131.000,E,1,1328248,0.9,545.4,M,46.9,M,,\r\n".utf8)
        let decoded = TestSupport.decode(gga, options: options)
        #expect(decoded.positions.isEmpty)
        #expect(decoded.statistics.badField == 1)
        let fine = Array("$GPGGA,123519,4807.038,N,01131.000,E,1,999,0.9,545.4,M,46.9,M,,\r\n".utf8)
        #expect(TestSupport.decode(fine, options: options).positions.first?.satellites == 999)
    }
}
