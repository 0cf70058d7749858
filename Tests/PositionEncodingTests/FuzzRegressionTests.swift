import GatewayCore
import PositionEncoding
import Testing

/// Inputs on which fuzzing (`make fuzz`, Fuzz/README.md) found a defect in the position object's
/// encoding, kept so it stays fixed.
@Suite struct FuzzRegressionTests {
    /// Fuzz/MQTTMessages crash-d2ddbdc3 (the whole payload is in MQTTInputTests): an explicit
    /// `"id":""` was kept, so every such position carried the same empty idempotency key. An
    /// empty id now counts as absent, in every source that reads this schema.
    @Test(arguments: [#""id":"""#, #""id":null"#, ""])
    func anEmptyOrAbsentIdIsGenerated(idMember: String) throws {
        let text = #"{"lat":46.0569,"lon":14.5058"# + (idMember.isEmpty ? "" : "," + idMember) + "}"
        let position = try PositionJSON.decode(JSONValue.parse(string: text), source: "rx") { _ in "rx-made" }
        #expect(position.id == "rx-made")
    }
}
