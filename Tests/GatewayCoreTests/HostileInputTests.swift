import GatewayCore
import Testing

/// Numbers too large for an integer must be errors, not traps (found by fuzzing the JSON paths;
/// the position object's are in PositionEncodingTests).
@Suite struct HostileInputTests {
    @Test(arguments: ["66666666666666666666", "1e300s", "99999999999999999999h", "36500000000d"])
    func hugeDurationsAreRejected(text: String) {
        #expect(DurationText.parse(text) == nil)
    }

    @Test func aHugeDurationInAConfigIsAProblemNotACrash() {
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: JSONObject([("t", .number(1e300)), ("u", .string("1e30s"))]), path: "x", diagnostics: diagnostics)
        #expect(reader.duration("t") == nil)
        #expect(reader.duration("u") == nil)
        #expect(diagnostics.problems.map(\.path) == ["x.t", "x.u"])
    }
}
