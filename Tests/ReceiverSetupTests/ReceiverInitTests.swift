import GatewayCore
import ReceiverSetup
import Testing
import UBX

/// The `init` option: text lines and UBX messages, every problem reported at its JSON path.
@Suite struct ReceiverInitTests {
    static func read(_ json: String, environment: [String: String] = [:]) throws -> (steps: [ReceiverInitStep], problems: [String]) {
        guard case .object(let o) = try JSONValue.parse(Array(json.utf8)) else { throw ConfigurationError(problems: []) }
        let diagnostics = ConfigurationDiagnostics()
        var options = OptionReader(object: o, path: "sources.gnss", diagnostics: diagnostics, environment: environment)
        let steps = ReceiverInit.read("init", from: &options)
        return (steps, diagnostics.problems.map { "\($0.path): \($0.message)" })
    }

    @Test func linesValsetsAndRawMessagesBecomeStepsInOrder() throws {
        let (steps, problems) = try Self.read("""
        {"init": ["PMTK220,1000",
                  {"valset": {"CFG-RATE-MEAS": 100, "CFG-USBINPROT-RTCM3X": true}, "layers": ["ram", "bbr"], "timeout": "2s"},
                  {"ubx": "06 8A 00 01 00 00 09 00 91 20 01"},
                  {"ubx": "B5 62 06 8A 09 00 00 01 00 00 09 00 91 20 01 55 52"},
                  {"ubx": "0A 04"}]}
        """)
        #expect(problems.isEmpty, "\(problems)")
        try #require(steps.count == 5)
        #expect(steps[0] == .text("PMTK220,1000"))
        guard case .ubx(let valset) = steps[1], case .ubx(let raw) = steps[2], case .ubx(let whole) = steps[3], case .ubx(let poll) = steps[4] else {
            Issue.record("expected UBX steps: \(steps)")
            return
        }
        #expect(valset.label == "init[1]")
        #expect(valset.summary == "CFG-VALSET (ram+bbr) CFG-RATE-MEAS=100, CFG-USBINPROT-RTCM3X=true")
        #expect(valset.timeout == .seconds(2))
        #expect(valset.expectsAcknowledgement)
        #expect(raw.frame == whole.frame)
        #expect(raw.frame == ValsetTests.hex("b5 62 06 8a 09 00 00 01 00 00 09 00 91 20 01 55 52"))
        #expect(raw.timeout == ReceiverInit.defaultTimeout)
        // MON-VER poll: not a CFG message, so no ACK is awaited.
        #expect(poll.message == UBXMessageID(0x0A, 0x04) && !poll.expectsAcknowledgement)
    }

    @Test func everyProblemIsReportedAtItsPath() throws {
        let (steps, problems) = try Self.read("""
        {"init": [42,
                  {"valset": {"CFG-RATE-MEASURE": 100, "CFG-RATE-NAV": 70000, "CFG-USBINPROT-RTCM3X": "yes"}},
                  {"valset": {}, "layer": ["ram"]},
                  {"valset": {"CFG-RATE-MEAS": 100}, "layers": ["ram", "eeprom"]},
                  {"ubx": "B5 62 06 8A 09 00 00 01 00 00 09 00 91 20 01 55 53"},
                  {"ubx": "06 8A 0"},
                  {"ubx": "06 8A", "valset": {"CFG-RATE-MEAS": 100}},
                  {"timeout": "soon", "ubx": "06 8A"}]}
        """)
        #expect(steps.isEmpty)
        #expect(problems == [
            "sources.gnss.init[0]: expected a text line or a UBX message object ({\"valset\": …} or {\"ubx\": \"hex\"}), got a number",
            "sources.gnss.init[1].valset.CFG-RATE-MEASURE: unknown configuration key; did you mean \"CFG-RATE-MEAS\"?; give keys outside locgate's table by id (\"0x30210001\"), see Plugins/SerialInput/README.md",
            "sources.gnss.init[1].valset.CFG-RATE-NAV: expected a whole number 0…65535 (U2) for CFG-RATE-NAV, got 70000",
            "sources.gnss.init[1].valset.CFG-USBINPROT-RTCM3X: expected true or false for CFG-USBINPROT-RTCM3X, got \"yes\"",
            "sources.gnss.init[2].layer: unknown option; did you mean \"layers\"?; options: valset, layers, ubx, timeout",
            "sources.gnss.init[2].valset: must not be empty",
            "sources.gnss.init[3].layers[1]: expected \"ram\", \"bbr\" or \"flash\", got \"eeprom\"",
            "sources.gnss.init[4].ubx: not one whole UBX frame: its checksum is wrong (or give class, id and payload without B5 62 and the checksum is computed)",
            "sources.gnss.init[5].ubx: an odd number of hex digits",
            "sources.gnss.init[6]: give either \"valset\" or \"ubx\", not both",
            "sources.gnss.init[7].timeout: expected a duration such as \"1s\" (more than 0), got \"soon\"",
        ])
    }

    @Test func moreThan64KeysBecomeSeveralValsets() throws {
        let keys = (0..<70).map { "\"0x2091\(String(format: "%04X", 0x100 + $0))\": 0" }.joined(separator: ",")
        let (steps, problems) = try Self.read(#"{"init": [{"valset": {\#(keys)}}]}"#)
        #expect(problems.isEmpty)
        let frames = steps.compactMap { if case .ubx(let c) = $0 { c } else { nil } }
        #expect(frames.map(\.label) == ["init[0] part 1", "init[0] part 2"])
        #expect(frames.map { $0.frame.count } == [8 + 4 + 64 * 5, 8 + 4 + 6 * 5])
    }

    @Test func environmentValuesAreSubstitutedInLinesAndHex() throws {
        let (steps, problems) = try Self.read(#"{"init": ["PMTK${RATE}", {"ubx": "${MSG}"}]}"#, environment: ["RATE": "220,100", "MSG": "0A 04"])
        #expect(problems.isEmpty)
        #expect(steps.first == .text("PMTK220,100"))
        if case .ubx(let c)? = steps.last { #expect(c.message == UBXMessageID(0x0A, 0x04)) } else { Issue.record("\(steps)") }
    }
}
