import GatewayCore
import Testing

/// Numbers too large for an integer must be errors, not traps (found by fuzzing the JSON paths).
@Suite struct HostileInputTests {
    @Test(arguments: [
        #"{"lat":1,"lon":2,"time":6.666666666666667e19}"#,
        #"{"lat":1,"lon":2,"mode":1e300}"#,
        #"{"lat":1,"lon":2,"status":-1e200}"#,
        #"{"lat":1,"lon":2,"uSat":1e40}"#,
        #"{"lat":1,"lon":2,"uSat":-3}"#,
    ])
    func hugeNumbersInAPositionAreDecodeErrors(json: String) throws {
        let value = try JSONValue.parse(string: json)
        #expect(throws: PositionJSON.DecodeError.self) {
            _ = try PositionJSON.decode(value, source: "t") { _ in "id" }
        }
    }

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
