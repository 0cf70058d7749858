import GatewayCore
import PositionEncoding
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
}
