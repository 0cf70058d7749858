import GatewayCore
import Testing

/// `Option`: one declaration gives the docs' row, the reader's value (limits checked, problems
/// reported with their path, the default on a problem) and the default the structs start from.
@Suite struct OptionTests {
    enum Shape: String, CaseIterable, Sendable { case round, square, long_side }

    static let gap = Option("gap", default: Duration.seconds(60), minimum: .milliseconds(1), "A gap.")
    static let speed = Option("batch.max_speed", default: 70.0, in: 0.001...1e6, "Metres per second.")
    static let count = Option("count", default: 5, in: 1...10, "How many.")
    static let shape = Option("shape", default: Shape.round, "Which shape.")
    static let mode = Option("mode", choices: ["append", "truncate"], default: "append", "How.")
    static let beat = Option("heartbeat", default: Duration.zero, note: "off", "A beat.")
    static let flag = Option("flag", default: true, "A flag.")
    static let version = Option("protocol", choices: ["5", "3.1.1"], quoted: true, default: "5", "Version.")
    static let unknown = Option("unknown_devices", spellings: (no: "reject", yes: "accept"), default: false, "Unknown ones.")
    static let lines = Option("init", default: [String](), "Lines.")
    static let headers = Option("headers", default: [String: String](), "Headers.")
    static let listen = Option("listen", default: ListenAddress(host: "127.0.0.1", port: 5055), "Where.")

    /// Reads `option` from the JSON object `json`, returning the value and the problems reported.
    static func read<Value>(_ option: Option<Value>, _ json: String) throws -> (Value, [String]) {
        let object = try #require(try JSONValue.parse(string: json).objectValue)
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: "sinks.up", diagnostics: diagnostics)
        let value = reader.read(option)
        reader.finish()
        return (value, diagnostics.problems.map { "\($0.path): \($0.message)" })
    }

    @Test func theDocumentationRowComesFromTheDeclaration() {
        #expect(Self.gap.spec == OptionSpec("gap", "duration", default: "\"60s\"", "A gap."))
        #expect(Self.speed.spec == OptionSpec("batch.max_speed", "number", default: "70", "Metres per second."))
        #expect(Self.count.spec == OptionSpec("count", "integer", default: "5", "How many."))
        #expect(Self.shape.spec == OptionSpec("shape", "round | square | long_side", default: "\"round\"", "Which shape."))
        #expect(Self.mode.spec == OptionSpec("mode", "append | truncate", default: "\"append\"", "How."))
        #expect(Self.beat.spec.defaultValue == "\"0s\" (off)")
        #expect(Self.flag.spec.defaultValue == "true")
        #expect(Self.version.spec == OptionSpec("protocol", "\"5\" | \"3.1.1\"", default: "\"5\"", "Version."))
        #expect(Self.unknown.spec == OptionSpec("unknown_devices", "\"reject\" | \"accept\"", default: "\"reject\"", "Unknown ones."))
        #expect(Self.lines.spec == OptionSpec("init", "array", default: "[]", "Lines."))
        #expect(Self.headers.spec == OptionSpec("headers", "object", default: "{}", "Headers."))
        #expect(Self.listen.spec == OptionSpec("listen", "string", default: "\"127.0.0.1:5055\"", "Where."))
        #expect(Option("l", default: ["a", "b\"c"], "").spec.defaultValue == #"["a","b\"c"]"#)
        #expect(Option("m", default: ["b": "2", "a": "1"], "").spec.defaultValue == #"{"a":"1","b":"2"}"#)
        #expect(Option("v6", default: ListenAddress(host: "::1", port: 80), "").spec.defaultValue == #""[::1]:80""#)
        // Durations as users write them: the largest unit that divides evenly, a minute as 60s.
        let texts = [Duration.milliseconds(500), .seconds(5), .seconds(90), .seconds(120), .seconds(900), .seconds(3600), .seconds(30 * 86_400)]
            .map { Option("d", default: $0, "").spec.defaultValue ?? "" }
        #expect(texts == ["\"500ms\"", "\"5s\"", "\"90s\"", "\"2m\"", "\"15m\"", "\"1h\"", "\"30d\""])
    }

    @Test func aWrittenValueIsReadAndAnAbsentOneIsTheDefault() throws {
        #expect(try Self.read(Self.gap, #"{ "gap": "5s" }"#) == (.seconds(5), []))
        #expect(try Self.read(Self.gap, #"{}"#) == (.seconds(60), []))
        #expect(try Self.read(Self.gap, #"{ "gap": null }"#) == (.seconds(60), []))
        #expect(try Self.read(Self.count, #"{ "count": 7 }"#) == (7, []))
        #expect(try Self.read(Self.shape, #"{ "shape": "long_side" }"#) == (.long_side, []))
        #expect(try Self.read(Self.mode, #"{ "mode": "truncate" }"#) == ("truncate", []))
        #expect(try Self.read(Self.flag, #"{ "flag": false }"#) == (false, []))
        #expect(try Self.read(Self.version, #"{ "protocol": "3.1.1" }"#) == ("3.1.1", []))
        #expect(try Self.read(Self.unknown, #"{ "unknown_devices": "accept" }"#) == (true, []))
        #expect(try Self.read(Self.unknown, #"{ "unknown_devices": "reject" }"#) == (false, []))
        #expect(try Self.read(Self.lines, #"{ "init": ["a", "b"] }"#) == (["a", "b"], []))
        #expect(try Self.read(Self.headers, #"{ "headers": { "X": "1", "Y": 2 } }"#) == (["X": "1", "Y": "2"], []))
        #expect(try Self.read(Self.listen, #"{ "listen": "[::]:80" }"#) == (ListenAddress(host: "::", port: 80), []))
        #expect(try Self.read(Self.listen, #"{}"#) == (ListenAddress(host: "127.0.0.1", port: 5055), []))
        // A nested option is read by its last part from the nested object's reader.
        #expect(Self.speed.key == "max_speed")
        #expect(try Self.read(Self.speed, #"{ "max_speed": 12.5 }"#) == (12.5, []))
    }

    @Test func aWrongValueIsReportedWithItsPathAndTheDefaultIsKept() throws {
        #expect(try Self.read(Self.count, #"{ "count": 11 }"#) == (5, ["sinks.up.count: must be between 1 and 10, got 11"]))
        #expect(try Self.read(Self.count, #"{ "count": 2.5 }"#) == (5, ["sinks.up.count: expected a whole number, got 2.5"]))
        #expect(try Self.read(Self.gap, #"{ "gap": "0s" }"#) == (.seconds(60), ["sinks.up.gap: must be at least 1ms, got 0s"]))
        #expect(try Self.read(Self.flag, #"{ "flag": "yes" }"#) == (true, ["sinks.up.flag: expected true or false, got a string"]))
        #expect(try Self.read(Self.unknown, #"{ "unknown_devices": "allow" }"#)
            == (false, [#"sinks.up.unknown_devices: expected one of "reject", "accept", got "allow""#]))
        #expect(try Self.read(Self.lines, #"{ "init": ["a", 1] }"#) == (["a"], ["sinks.up.init[1]: expected a string, got a number"]))
        #expect(try Self.read(Self.listen, #"{ "listen": "5055" }"#)
            == (ListenAddress(host: "127.0.0.1", port: 5055), [#"sinks.up.listen: expected an IP address and a port such as "127.0.0.1:5055" or "[::1]:5055", got "5055""#]))
        let (shape, problems) = try Self.read(Self.shape, #"{ "shape": "rond" }"#)
        #expect(shape == .round)
        #expect(problems == [#"sinks.up.shape: expected one of "round", "square", "long_side", got "rond"; did you mean "round"?"#])
    }

    @Test func anyTypeCanBeAnOptionThroughTheGeneralInitializer() throws {
        // nil stands for "auto", as the serial source's baud does.
        let baud = Option<Int?>("baud", default: 9600, typeName: "integer | \"auto\"", "Bits per second.",
                                jsonText: { $0.map(String.init) ?? "\"auto\"" },
                                read: { key, reader in
                                    if case .string("auto")? = reader.value(key) { return .some(nil) }
                                    return reader.int(key).map { .some($0) }
                                })
        #expect(baud.spec == OptionSpec("baud", "integer | \"auto\"", default: "9600", "Bits per second."))
        #expect(try Self.read(baud, #"{ "baud": "auto" }"#).0 == nil)
        #expect(try Self.read(baud, #"{ "baud": 4800 }"#).0 == 4800)
        #expect(try Self.read(baud, #"{}"#).0 == 9600)
    }
}
