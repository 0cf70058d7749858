import GatewayCore
import Testing

@Suite struct SuggestionTests {
    @Test(arguments: [
        ("rte", ["path", "format", "rate", "loop"], "rate"),
        ("baud_rate", ["port", "baud", "match"], "baud"),
        ("min_distance", ["min_distance_m", "heartbeat"], "min_distance_m"),
        ("serail", ["file", "serial", "gpsd"], "serial"),
        ("intervall", ["max_positions", "interval"], "interval"),
        ("flie", ["file", "stdout"], "file"),
    ])
    func aTypoGetsTheNameItMeant(word: String, candidates: [String], expected: String) {
        #expect(Suggestion.closest(to: word, among: candidates) == expected)
    }

    @Test func somethingUnrelatedGetsNoSuggestion() {
        #expect(Suggestion.closest(to: "colour", among: ["path", "format", "rate", "loop"]) == nil)
        #expect(Suggestion.closest(to: "x", among: ["y", "z"]) == nil)
    }
}
