/// `settings.commands`: where a gateway keeps its commands to devices, and their defaults.
///
/// ```json
/// "settings": { "commands": { "path": "/var/lib/locgate/commands.sqlite", "ttl": "24h", "attempts": 3, "retain": "7d", "answer_timeout": "1m" } }
/// ```
///
/// Commands are kept when a source can carry them (a tracker source on TCP, an OwnTracks
/// `http_server`) or a `commands` sink submits them: in `path`, by default `commands-<name>` beside the state store's file (itself
/// beside the first durable queue), else in memory only (logged at start). `null` turns them off.
public struct CommandSettings: Sendable, Hashable {
    public static let ttlOption = Option("commands.ttl", default: Duration.seconds(86_400), minimum: .seconds(1),
        "How long a command may wait to be sent when its request says nothing; past it, it expires and is never sent.")
    public static let attemptsOption = Option("commands.attempts", default: 3, in: 1...100,
        "How often a command is sent (again on each new connection) before it fails for want of an answer.")
    public static let retainOption = Option("commands.retain", default: Duration.seconds(7 * 86_400), minimum: .seconds(60),
        "How long ended commands (done, failed, delivered, expired, cancelled) are kept for their status to be read.")
    public static let answerTimeoutOption = Option("commands.answer_timeout", default: Duration.seconds(60), minimum: .seconds(1),
        "How long a device has to answer a command before its next one goes; the unanswered one stays sent and goes again on the device's next connection.")

    /// The SQLite file; nil: beside the state store, or in memory.
    public var path: String?
    public var ttl = CommandSettings.ttlOption.defaultValue
    public var attempts = CommandSettings.attemptsOption.defaultValue
    public var retain = CommandSettings.retainOption.defaultValue
    public var answerTimeout = CommandSettings.answerTimeoutOption.defaultValue
    /// `"commands": null`: no commands.
    public var disabled = false

    public init() {}

    public static let options: [OptionSpec] = [
        OptionSpec("commands", "object | null", default: "{} (beside the state store)", "Commands to devices (the operator API's /devices/{device}/commands, the commands sink); null: none."),
        OptionSpec("commands.path", "path", default: "commands-<name> beside the state store's file", "SQLite file of the commands; without it and without a state store, commands are kept in memory only (logged at start)."),
        ttlOption.spec, attemptsOption.spec, retainOption.spec, answerTimeoutOption.spec,
    ]

    /// Reads `settings.commands` (the reader is at `settings`).
    public static func read(_ settings: inout OptionReader) -> CommandSettings {
        var result = CommandSettings()
        guard settings.has("commands") else { return result }
        guard var c = settings.object("commands") else {
            result.disabled = settings.value("commands") == nil
            return result
        }
        result.path = c.filePath("path")
        result.ttl = c.read(ttlOption)
        result.attempts = c.read(attemptsOption)
        result.retain = c.read(retainOption)
        result.answerTimeout = c.read(answerTimeoutOption)
        c.finish()
        return result
    }
}

extension PipelineConfiguration {
    /// The commands' SQLite file: `settings.commands.path`, else `commands-<name>` beside the state
    /// store's file; nil when commands are off or kept in memory only.
    public var commandStorePath: String? {
        let c = settings.commands
        if c.disabled { return nil }
        if let path = c.path { return path }
        guard let state = stateStorePath else { return nil }
        let slash = state.lastIndex(of: "/")
        let directory = slash.map { String(state[...$0]) } ?? ""
        var name = slash.map { String(state[state.index(after: $0)...]) } ?? state
        if name.hasPrefix("state-") { name.removeFirst(6) }
        return directory + "commands-" + name
    }
}
