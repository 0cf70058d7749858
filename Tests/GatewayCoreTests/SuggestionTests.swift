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
        ("ubx", ["ublox", "mtk", "commands", "close"], "ublox"),
        ("cmds", ["ublox", "mtk", "commands", "close"], "commands"),
        // A near edit wins over an abbreviation.
        ("cmds", ["commands", "cmd"], "cmd"),
    ])
    func aTypoGetsTheNameItMeant(word: String, candidates: [String], expected: String) {
        #expect(Suggestion.closest(to: word, among: candidates) == expected)
    }

    @Test func somethingUnrelatedGetsNoSuggestion() {
        #expect(Suggestion.closest(to: "colour", among: ["path", "format", "rate", "loop"]) == nil)
        #expect(Suggestion.closest(to: "x", among: ["y", "z"]) == nil)
        // Letters in order are not enough without the first one, nor for two letters.
        #expect(Suggestion.closest(to: "box", among: ["ublox", "mtk"]) == nil)
        #expect(Suggestion.closest(to: "ux", among: ["ublox", "mtk"]) == nil)
        // An empty name is no suggestion (it is a prefix of every word).
        #expect(Suggestion.closest(to: "colour", among: ["", "path"]) == nil)
    }
}
