import GatewayCore
import MQTTInput
import Testing

/// Inputs on which a fuzz target (`make fuzz`, Fuzz/README.md) found a defect, kept so it stays fixed.
@Suite struct FuzzRegressionTests {
    /// Fuzz/MQTTMessages crash-d2ddbdc3: format `json`, device template `fleet/{-1}`, topic
    /// `fleet/truck-7` and this payload (a corpus position whose id libFuzzer emptied, with a
    /// repeated `speed`). The position came out with the id `""`, the same for every such message,
    /// so sinks and `dedupe` would have taken them all for one.
    static let payload = Array(#"""
        {"class":"TPV","time":"2024-05-01T10:00:00.000Z","mode":3,"lat":46.0569,"lon":14.5058,"altMSL":295.1,"speed":1.2,"L":295.1,"speed":1.2,"track":270.5,"source":"receiver","device":"gnss","id":""}
        """#.utf8)

    @Test func aPositionWithAnEmptyIdGetsTheIdOfItsSourceDeviceAndTime() throws {
        let template = try #require(MQTTDeviceTemplate.compile("fleet/{-1}").template)
        let decoder = MQTTMessageDecoder(format: .json, device: template, maxBytes: 65_536, sourceID: "phones")
        guard case .position(let position) = decoder.decode(topic: "fleet/truck-7", payload: Self.payload, sequence: 0) else {
            Issue.record("skipped")
            return
        }
        #expect(position.id == "phones-fleet/truck-7-1714557600000")
        #expect(position.device == "fleet/truck-7")
    }
}
