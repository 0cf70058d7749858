/// One option of a component or of the settings, declared once: its name, type, default, limits
/// and documentation.
///
/// The three places that used to repeat a default each take it from here: the ``OptionSpec``
/// that `locgate plugins` prints and the README tables are checked against (``spec``), the
/// reader's call (``OptionReader/read(_:)``) and the configuration struct's initial value
/// (``defaultValue``). So a default is changed in one place and the docs follow.
///
/// ```swift
/// static let gap = Option("gap", default: Duration.seconds(60), minimum: .milliseconds(1), "…")
/// public var gap = DistanceFilterPlugin.gap.defaultValue        // the configuration
/// c.gap = options.read(DistanceFilterPlugin.gap)                // the reader
/// options: [DistanceFilterPlugin.gap.spec, …]                   // the docs
/// ```
///
/// Options without a value default (required ones, or a default that is a rule such as
/// "from the environment") have nothing to repeat and stay plain ``OptionSpec``s.
public struct Option<Value: Sendable>: Sendable {
    /// The name as documented: a member of a nested object is dotted (`batch.interval`).
    public let name: String
    public let defaultValue: Value
    /// What it does, with its unit.
    public let summary: String
    /// Words shown after the default in the docs, e.g. `off` for a zero heartbeat.
    public let note: String?
    /// The type column of the docs (`duration`, `jsonl | csv`).
    public let typeName: String
    /// The value as written in a configuration file.
    let jsonText: @Sendable (Value) -> String
    /// The value at a key with its limits checked, or nil when absent or wrong (reported).
    let readValue: @Sendable (String, inout OptionReader) -> Value?

    /// An option of any type: how the docs name it, write its default, and how it is read.
    public init(_ name: String, default value: Value, typeName: String, note: String? = nil, _ summary: String,
                jsonText: @escaping @Sendable (Value) -> String, read: @escaping @Sendable (String, inout OptionReader) -> Value?) {
        self.name = name
        self.defaultValue = value
        self.summary = summary
        self.note = note
        self.typeName = typeName
        self.jsonText = jsonText
        self.readValue = read
    }

    /// The key the reader looks up in its (possibly nested) object: the last part of ``name``.
    public var key: String {
        guard let dot = name.lastIndex(of: ".") else { return name }
        return String(name[name.index(after: dot)...])
    }

    /// The documentation entry: type and default rendered from the declaration.
    public var spec: OptionSpec {
        var text = jsonText(defaultValue)
        if let note { text += " (\(note))" }
        return OptionSpec(name, typeName, default: text, summary)
    }
}

extension Option where Value == Double {
    public init(_ name: String, default value: Double, in range: ClosedRange<Double>? = nil, note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "number", note: note, summary, jsonText: { JSONValue.number($0).jsonText }) { key, reader in
            range.map { reader.optionalDouble(key, in: $0) } ?? reader.double(key)
        }
    }
}

extension Option where Value == Int {
    /// `typeName` names the values when they are few (`0 | 1 | 2`).
    public init(_ name: String, default value: Int, in range: ClosedRange<Int>? = nil, typeName: String = "integer", note: String? = nil,
                _ summary: String) {
        self.init(name, default: value, typeName: typeName, note: note, summary, jsonText: { String($0) }) { key, reader in
            range.map { reader.optionalInt(key, in: $0) } ?? reader.int(key)
        }
    }
}

extension Option where Value == Bool {
    public init(_ name: String, default value: Bool, note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "boolean", note: note, summary, jsonText: { $0 ? "true" : "false" }) { key, reader in
            reader.optionalBool(key)
        }
    }
}

extension Option where Value == Duration {
    public init(_ name: String, default value: Duration, minimum: Duration = .zero, note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "duration", note: note, summary, jsonText: OptionText.duration) { key, reader in
            reader.optionalDuration(key, minimum: minimum)
        }
    }
}

extension Option where Value == String {
    /// A free string.
    public init(_ name: String, default value: String, note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "string", note: note, summary, jsonText: OptionText.string) { key, reader in
            reader.string(key)
        }
    }

    /// One of a fixed set of spellings; the docs' type lists them (`a | b`), or with `quoted`
    /// as JSON strings (`"5" | "3.1.1"`, where a bare spelling would read as a number).
    public init(_ name: String, choices: [String], quoted: Bool = false, default value: String, note: String? = nil, _ summary: String) {
        precondition(choices.contains(value), "option \(name): the default \(value) is not one of its choices")
        let typeName = choices.map { quoted ? OptionText.string($0) : $0 }.joined(separator: " | ")
        self.init(name, default: value, typeName: typeName, note: note, summary, jsonText: OptionText.string) { key, reader in
            reader.optionalChoice(key, choices)
        }
    }
}

extension Option where Value == Bool {
    /// A choice between two words that the configuration holds as a flag: `spellings.no` reads as
    /// false, `spellings.yes` as true; the docs' type lists them as JSON strings (`"reject" | "accept"`).
    public init(_ name: String, spellings: (no: String, yes: String), default value: Bool, note: String? = nil, _ summary: String) {
        let words = [spellings.no, spellings.yes]
        self.init(name, default: value, typeName: words.map(OptionText.string).joined(separator: " | "), note: note, summary,
                  jsonText: { OptionText.string($0 ? spellings.yes : spellings.no) }) { key, reader in
            reader.optionalChoice(key, words).map { $0 == spellings.yes }
        }
    }
}

extension Option where Value == [String] {
    /// A list of strings (`${ENV}` substituted in each).
    public init(_ name: String, default value: [String], note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "array", note: note, summary,
                  jsonText: { JSONValue.array($0.map(JSONValue.string)).jsonText }) { key, reader in
            reader.stringArray(key)
        }
    }
}

extension Option where Value == [String: String] {
    /// An object of strings (numbers and booleans are read as text; `${ENV}` substituted).
    public init(_ name: String, default value: [String: String], note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "object", note: note, summary,
                  jsonText: { JSONValue.object(JSONObject($0.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) })).jsonText }) { key, reader in
            reader.stringMap(key)
        }
    }
}

extension Option where Value == ListenAddress {
    /// An address and port to listen on; a problem with one names the default as the example.
    public init(_ name: String, default value: ListenAddress, note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "string", note: note, summary, jsonText: { OptionText.string($0.description) }) { key, reader in
            guard let text = reader.string(key) else { return nil }
            guard let address = ListenAddress(parsing: text) else {
                reader.report(key, ListenAddress.problem(text, example: value.description))
                return nil
            }
            return address
        }
    }
}

extension Option where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// One of an enumeration's cases, spelled as their raw values (in declaration order).
    public init(_ name: String, default value: Value, note: String? = nil, _ summary: String) {
        let spellings = Value.allCases.map(\.rawValue)
        self.init(name, default: value, typeName: spellings.joined(separator: " | "), note: note, summary,
                  jsonText: { OptionText.string($0.rawValue) }) { key, reader in
            reader.optionalChoice(key, spellings).flatMap(Value.init(rawValue:))
        }
    }
}

extension Option where Value == FixMode {
    public init(_ name: String, default value: FixMode, note: String? = nil, _ summary: String) {
        self.init(name, default: value, typeName: "none | 2d | 3d", note: note, summary, jsonText: { OptionText.string($0.configName) }) { key, reader in
            reader.optionalChoice(key, ["none", "2d", "3d"]).flatMap(FixMode.init(configName:))
        }
    }
}

/// How the docs write option values.
public enum OptionText {
    /// A JSON string.
    public static func string(_ value: String) -> String { JSONValue.string(value).jsonText }

    /// A duration as users write it: the largest unit that divides it evenly, except that a
    /// minute is `60s`.
    public static func duration(_ value: Duration) -> String {
        let ms = value.milliseconds
        if ms > 0 && ms % 86_400_000 == 0 { return "\"\(ms / 86_400_000)d\"" }
        if ms > 0 && ms % 3_600_000 == 0 { return "\"\(ms / 3_600_000)h\"" }
        if ms >= 120_000 && ms % 60_000 == 0 { return "\"\(ms / 60_000)m\"" }
        if ms % 1000 == 0 { return "\"\(ms / 1000)s\"" }
        return "\"\(DurationText.format(value))\""
    }
}

extension OptionReader {
    /// The option's value, or its default when absent or wrong (a problem reported with its path).
    public mutating func read<Value>(_ option: Option<Value>) -> Value {
        option.readValue(option.key, &self) ?? option.defaultValue
    }
}
