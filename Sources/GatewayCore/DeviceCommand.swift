/// A command to a device (set its reporting interval, ask for a position, cut the engine…), kept
/// durably until the device acknowledged it, it expired or it was cancelled.
///
///     queued ──send──▶ sent ──the device's answer──▶ done / failed
///       │                │                        └──▶ delivered (a protocol that says no more: OwnTracks)
///       │                │   (a new connection sends it again, up to `attempts`)
///       ├──▶ expired     ├──▶ failed (no answer after `attempts` sends) / expired
///       └──▶ cancelled   └──▶ cancelled
///
/// Rules (Docs/Devices.md, "Talking to devices"):
/// - A command past `expires` is never sent: an engine stop queued for a car that was offline
///   does not fire hours later. The time to live governs sending: the answer to a command whose
///   bytes went out is recorded whenever it comes (`done` after `expired` or `cancelled`: the
///   device did it).
/// - One command at a time per device, oldest first; the next goes once the device answered the
///   one before, or after the answer timeout (the command then stays `sent` and goes again on
///   the device's next connection). A command cancelled or expired while its bytes are on their
///   way keeps its place until then, so a late answer is not taken for the next one's.
/// - A command is marked `sent` durably before its bytes go out; one the device acknowledged is
///   never sent again (a crash between the answer and its record is the only window). It goes
///   again only on another connection than the one it went on (``sentOn``).
public struct DeviceCommand: Sendable, Hashable {
    public var id: String
    /// The device, as its positions name it (`bus-12`).
    public var device: String
    public var type: CommandType
    /// What the type takes: `interval` (seconds, text), `text` (and `flags`, JT/T 808's), `data`
    /// (custom text), `hex` (custom bytes).
    public var parameters: [String: String]
    public var created: Timestamp
    public var expires: Timestamp
    /// How often it may be sent before it fails.
    public var attempts: Int
    /// How often it was sent.
    public var sends: Int
    /// The connection it last went on (`<gateway>/<n>`, the board's): it goes again only on another.
    public var sentOn: String?
    public var status: CommandStatus
    /// The device's answer: its text, or what the protocol's result code means.
    public var result: String?
    /// Who submitted it: the API token's name, or the `commands` sink's id.
    public var submittedBy: String
    /// The source whose protocol encodes it (set when submitted, from where the device is known).
    public var source: String
    /// Each status with when it was reached, oldest first.
    public var history: [Change]

    public struct Change: Sendable, Hashable {
        public var status: CommandStatus
        public var time: Timestamp
        public init(status: CommandStatus, time: Timestamp) {
            self.status = status
            self.time = time
        }
    }

    public init(id: String, device: String, type: CommandType, parameters: [String: String] = [:], created: Timestamp,
                expires: Timestamp, attempts: Int, submittedBy: String, source: String) {
        self.id = id
        self.device = device
        self.type = type
        self.parameters = parameters
        self.created = created
        self.expires = expires
        self.attempts = attempts
        sends = 0
        status = .queued
        self.submittedBy = submittedBy
        self.source = source
        history = [Change(status: .queued, time: created)]
    }

    /// Moves to `status` at `time` (recorded in the history).
    public mutating func move(to status: CommandStatus, at time: Timestamp, result: String? = nil) {
        self.status = status
        if let result { self.result = result }
        history.append(Change(status: status, time: time))
    }

    /// Whether it may still be sent at `now`.
    public func isSendable(at now: Timestamp) -> Bool {
        (status == .queued || status == .sent) && now < expires && sends < attempts
    }
}

/// What a command asks of the device. Each listening source says which it can carry
/// (``CommandCarrier``); another is refused when it is submitted.
public enum CommandType: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Text or bytes as the protocol takes them (`data` or `hex`).
    case custom
    /// The reporting period (`interval`, a duration).
    case setInterval = "set_interval"
    /// Report a position now.
    case positionNow = "position_now"
    /// Cut the fuel or the engine's circuit.
    case engineStop = "engine_stop"
    case engineResume = "engine_resume"
    case reboot
    /// A message for the driver (`text`).
    case text

    public static func < (a: CommandType, b: CommandType) -> Bool { a.rawValue < b.rawValue }
}

/// Where a command stands.
public enum CommandStatus: String, Sendable, Hashable, CaseIterable {
    case queued, sent, delivered, done, failed, expired, cancelled

    /// No further change comes.
    public var isFinal: Bool {
        switch self {
        case .done, .failed, .expired, .cancelled, .delivered: true
        case .queued, .sent: false
        }
    }
}

/// What a device answered to a command.
public enum CommandOutcome: Sendable, Hashable {
    /// Handed to the device by a protocol that says nothing more (`delivered`).
    case delivered
    /// Acknowledged with a result (`done`).
    case done(String)
    /// The device refused or could not do it (`failed`).
    case failed(String)
}

/// The commands of a gateway, as the listening sources, the `commands` sink and the operator API
/// see them (the runtime builds one, ``ComponentContext/commands``).
///
/// Implementation requirements:
/// - Every change is durable before it is acted on: a command is stored before `submit` returns,
///   marked sent before ``CommandLink/send(_:)`` is called.
/// - Calls come from any thread; links are called on any thread (they hop to their own).
public protocol CommandCenter: Sendable {
    /// A source that carries commands, with the types its protocol takes and how it reports a
    /// command's status as an event (a position with a `command` event).
    func register(source: String, types: Set<CommandType>, emit: @escaping @Sendable (Position) -> Void)
    /// Devices a source knows (its `devices`), so commands to them are taken while they are offline.
    func knows(devices: [String], source: String)
    /// A device is connected to `link`: its pending commands go, one at a time.
    func connected(_ device: String, source: String, link: any CommandLink)
    /// The device's connection ended; a command in flight stays `sent` (sent again next time).
    func disconnected(_ device: String, link: any CommandLink)
    /// The device answered command `id`.
    func answered(_ id: String, outcome: CommandOutcome)
    /// Stores a new command; throws what is wrong with it (unknown device or type, …).
    func submit(_ request: CommandRequest) throws(CommandError) -> DeviceCommand
    /// Cancels a command not yet delivered (`by`: who asked, for the log).
    func cancel(_ id: String, by: String) throws(CommandError) -> DeviceCommand
    /// Whether commands can be submitted for `device` (a source knows it, or it has commands).
    func isKnown(device: String) -> Bool
    func command(_ id: String) -> DeviceCommand?
    /// A device's commands, newest first.
    func commands(device: String) -> [DeviceCommand]
    /// The last value of each setting the device confirmed (`set_interval` → its interval): what a
    /// rule need not send again.
    func shadow(device: String) -> [CommandType: String]
}

/// A device's connection, as the command center reaches it.
public protocol CommandLink: AnyObject, Sendable {
    /// Sends the command (already marked sent); called on any thread.
    func send(_ command: DeviceCommand)
    /// Takes back command `id` given to ``send(_:)`` when none of it has gone to the device yet
    /// (it was cancelled or expired meanwhile); true when it was taken back.
    func withdraw(_ id: String) -> Bool
}

/// A command as submitted (API body, CLI, a `commands` sink rule).
public struct CommandRequest: Sendable, Hashable {
    public var device: String
    public var type: CommandType
    public var parameters: [String: String]
    /// Given by the caller, or made.
    public var id: String?
    /// Time to live from submission; nil: the center's default (24 h).
    public var ttl: Duration?
    /// How often it may be sent; nil: the center's default (3).
    public var attempts: Int?
    public var submittedBy: String

    public init(device: String, type: CommandType, parameters: [String: String] = [:], id: String? = nil, ttl: Duration? = nil,
                attempts: Int? = nil, submittedBy: String) {
        self.device = device
        self.type = type
        self.parameters = parameters
        self.id = id
        self.ttl = ttl
        self.attempts = attempts
        self.submittedBy = submittedBy
    }

    /// Reads a request body: `{"type": "set_interval", "interval": "20s", "id": …, "ttl": "2h",
    /// "attempts": 3}`; every other member is a parameter of the type. Throws every problem.
    public static func parse(_ value: JSONValue, device: String, submittedBy: String) throws(CommandError) -> CommandRequest {
        guard case .object(let o) = value else { throw .invalid(["the body: expected a JSON object, got \(value.kindName)"]) }
        var problems: [String] = []
        var type: CommandType?
        switch o["type"] {
        case .string(let t)?:
            type = CommandType(rawValue: t)
            if type == nil { problems.append("type: unknown command type \"\(t)\"; types: \(CommandType.allCases.map(\.rawValue).joined(separator: ", "))") }
        default: problems.append("type: required, a string")
        }
        var request = CommandRequest(device: device, type: type ?? .custom, submittedBy: submittedBy)
        for (key, v) in o where key != "type" {
            switch key {
            case "id":
                if case .string(let s) = v, Self.isValidID(s) { request.id = s } else { problems.append("id: 1 to 64 letters, digits, '-', '_' or '.'") }
            case "ttl":
                if let text = v.scalarText, let d = DurationText.parse(text), d > .zero {
                    request.ttl = d
                } else { problems.append("ttl: a positive duration such as \"2h\"") }
            case "attempts":
                if case .number(let n) = v, n == n.rounded(), (1...100).contains(n) { request.attempts = Int(n) } else { problems.append("attempts: a whole number from 1 to 100") }
            default:
                guard let text = v.scalarText else {
                    problems.append("\(key): expected a string, number or boolean")
                    continue
                }
                request.parameters[key] = text
            }
        }
        if let type { problems += Self.check(type, request.parameters) }
        guard problems.isEmpty else { throw .invalid(problems) }
        return request
    }

    /// Problems with a type's parameters.
    public static func check(_ type: CommandType, _ parameters: [String: String]) -> [String] {
        let allowed: Set<String>
        var problems: [String] = []
        switch type {
        case .setInterval:
            allowed = ["interval"]
            if let text = parameters["interval"] {
                if let d = DurationText.parse(text), d >= .seconds(1), d <= .seconds(86_400 * 7) {} else {
                    problems.append("interval: a duration from 1s to 7 days, such as \"20s\"")
                }
            } else { problems.append("interval: required for set_interval") }
        case .text:
            allowed = ["text", "flags"]
            if (parameters["text"] ?? "").isEmpty { problems.append("text: required for text, not empty") }
            if parameters["flags"] != nil && textFlags(parameters) == nil { problems.append("flags: a number from 0 to 255 (0x00 to 0xFF)") }
        case .custom:
            allowed = ["data", "hex"]
            switch (parameters["data"], parameters["hex"]) {
            case (nil, nil): problems.append("data or hex: one is required for custom")
            case (.some, .some): problems.append("data and hex: give one of them")
            case (nil, let hex?) where !Self.isHex(hex): problems.append("hex: pairs of hex digits")
            default: break
            }
        case .positionNow, .engineStop, .engineResume, .reboot:
            allowed = []
        }
        for key in parameters.keys.sorted() where !allowed.contains(key) {
            problems.append("\(key): not a parameter of \(type.rawValue)\(allowed.isEmpty ? " (it takes none)" : "; it takes \(allowed.sorted().joined(separator: ", "))")")
        }
        return problems
    }

    /// The `flags` of a `text` (JT/T 808's 0x8300 flag byte: 0x01 emergency, 0x04 shown, 0x08
    /// read out, …): decimal or `0x` hex, 0 to 255; nil when absent or not such a number.
    public static func textFlags(_ parameters: [String: String]) -> UInt8? {
        guard let text = parameters["flags"] else { return nil }
        let utf8 = Array(text.utf8)
        if utf8.count > 2, utf8[0] == 48, utf8[1] == 120 || utf8[1] == 88 {
            let digits = utf8[2...]
            guard digits.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 70) || ($0 >= 97 && $0 <= 102) }) else { return nil }
            return UInt8(String(decoding: digits, as: UTF8.self), radix: 16)
        }
        return utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) ? UInt8(text) : nil
    }

    /// The interval of a `set_interval`, in whole seconds.
    public static func intervalSeconds(_ parameters: [String: String]) -> Int? {
        guard let text = parameters["interval"], let d = DurationText.parse(text) else { return nil }
        return Int(d.milliseconds / 1000)
    }

    static func isValidID(_ s: String) -> Bool {
        (1...64).contains(s.utf8.count) && s.utf8.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45 || c == 95 || c == 46
        }
    }

    static func isHex(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count % 2 == 0 && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 70) || ($0 >= 97 && $0 <= 102) }
    }
}

/// Why a command was not taken or changed.
public struct CommandError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable { case invalid, unknownDevice, unsupported, notFound, conflict, unavailable }
    private let code: Code
    /// What was wrong, one line each.
    public let problems: [String]

    private init(_ code: Code, _ problems: [String]) {
        self.code = code
        self.problems = problems
    }

    /// The request itself is wrong (400).
    public static func invalid(_ problems: [String]) -> CommandError { CommandError(.invalid, problems) }
    /// No source knows the device (404).
    public static func unknownDevice(_ device: String) -> CommandError {
        CommandError(.unknownDevice, ["device \"\(device)\": no source knows it (not in a source's devices, never connected)"])
    }
    /// The device's protocol cannot carry the type (422).
    public static func unsupported(_ type: CommandType, source: String, supported: Set<CommandType>) -> CommandError {
        CommandError(.unsupported, ["type \(type.rawValue): the device's source \(source) cannot carry it; it takes \(supported.sorted().map(\.rawValue).joined(separator: ", "))"])
    }
    /// No such command (404).
    public static func notFound(_ id: String) -> CommandError { CommandError(.notFound, ["no command \"\(id)\""]) }
    /// The command cannot change any more, or its id is taken (409).
    public static func conflict(_ problem: String) -> CommandError { CommandError(.conflict, [problem]) }
    /// The store could not keep it (503).
    public static func unavailable(_ problem: String) -> CommandError { CommandError(.unavailable, [problem]) }

    /// The HTTP status that says it.
    public var httpStatus: Int {
        switch code {
        case .invalid: 400
        case .unknownDevice, .notFound: 404
        case .unsupported: 422
        case .conflict: 409
        case .unavailable: 503
        }
    }

    public var description: String { problems.joined(separator: "; ") }
}

/// Where a gateway keeps its commands (`settings.commands`): an SQLite file, or a JetStream
/// Key-Value bucket shared by the gateways of a fleet.
///
/// Implementation requirements:
/// - ``save(_:expecting:)`` is durable when it returns. With `expecting`, it writes only when the
///   stored command is still in that status (another gateway may have moved it) and throws
///   ``CommandError/conflict(_:)`` otherwise.
/// - ``load()`` returns every command not final and the final ones not yet forgotten.
public protocol CommandStore: Sendable {
    func load() throws -> [DeviceCommand]
    func save(_ command: DeviceCommand, expecting: CommandStatus?) throws
    /// The devices seen connected, with their source (so commands to them are taken offline).
    func loadDevices() throws -> [String: String]
    func saveDevice(_ device: String, source: String) throws
    /// A fleet's store: who holds each device's connection, as the gateways announced it.
    func loadHolders() throws -> [String: CommandHolder]
    /// A fleet's store: this gateway holds the device's connection now (its source is
    /// remembered too). Other gateways send the device nothing while this is the newest.
    func announce(_ device: String, holder: CommandHolder) throws
    /// Forgets final commands that ended before `before`.
    func purge(before: Timestamp) throws
    var location: String { get }
    func close()
    /// Whether other gateways write to the same store (a fleet's bucket): the board then reads
    /// what they changed (``observe(_:)``, ``fetch(_:)``).
    var isShared: Bool { get }
    /// One command as the store has it now.
    func fetch(_ id: String) throws -> DeviceCommand?
    /// Calls `changed` with every command and holder another writer stored (from a thread of
    /// the store's; its own writes may come back too).
    func observe(_ changed: @escaping @Sendable (CommandStoreChange) -> Void)
}

/// What another gateway of a fleet wrote to the shared store.
public enum CommandStoreChange: Sendable, Hashable {
    case command(DeviceCommand)
    case holder(device: String, CommandHolder)
}

/// The gateway holding a device's connection, since when, and through which source.
public struct CommandHolder: Sendable, Hashable {
    public var source: String
    public var gateway: String
    public var since: Timestamp

    public init(source: String, gateway: String, since: Timestamp) {
        self.source = source
        self.gateway = gateway
        self.since = since
    }

    /// Whether it is newer than `other` (ties go to the larger gateway name: every gateway agrees).
    public func isNewer(than other: CommandHolder) -> Bool {
        since != other.since ? since > other.since : gateway > other.gateway
    }
}

// MARK: - Default implementations

extension CommandStore {
    public var isShared: Bool { false }
    public func fetch(_ id: String) throws -> DeviceCommand? { try load().first { $0.id == id } }
    public func observe(_ changed: @escaping @Sendable (CommandStoreChange) -> Void) {}
    public func loadHolders() throws -> [String: CommandHolder] { [:] }
    public func announce(_ device: String, holder: CommandHolder) throws { try saveDevice(device, source: holder.source) }
}

// MARK: - JSON

extension DeviceCommand {
    /// The command as the API shows it and the stores keep it.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("id", .string(id)), ("device", .string(device)), ("type", .string(type.rawValue)),
            ("parameters", .object(JSONObject(parameters.keys.sorted().map { ($0, .string(parameters[$0]!)) }))),
            ("status", .string(status.rawValue)),
        ]
        if let result { members.append(("result", .string(result))) }
        members += [
            ("created", .string(created.iso8601)), ("expires", .string(expires.iso8601)),
            ("attempts", .number(Double(attempts))), ("sends", .number(Double(sends))),
            ("submitted_by", .string(submittedBy)), ("source", .string(source)),
            ("history", .array(history.map { .object(JSONObject([("status", .string($0.status.rawValue)), ("time", .string($0.time.iso8601))])) })),
        ]
        if let sentOn { members.append(("sent_on", .string(sentOn))) }
        return .object(JSONObject(members))
    }

    /// Reads ``json`` back; nil when it is not one.
    public init?(json value: JSONValue) {
        guard case .object(let o) = value, let id = o["id"]?.stringValue, let device = o["device"]?.stringValue,
              let type = o["type"]?.stringValue.flatMap(CommandType.init(rawValue:)),
              let status = o["status"]?.stringValue.flatMap(CommandStatus.init(rawValue:)),
              let created = o["created"]?.stringValue.flatMap(Timestamp.init(iso8601:)),
              let expires = o["expires"]?.stringValue.flatMap(Timestamp.init(iso8601:)),
              let attempts = o["attempts"]?.numberValue, let sends = o["sends"]?.numberValue
        else { return nil }
        var parameters: [String: String] = [:]
        for (k, v) in o["parameters"]?.objectValue ?? JSONObject() { parameters[k] = v.stringValue }
        self.init(id: id, device: device, type: type, parameters: parameters, created: created, expires: expires,
                  attempts: Int(attempts), submittedBy: o["submitted_by"]?.stringValue ?? "", source: o["source"]?.stringValue ?? "")
        self.status = status
        self.sends = Int(sends)
        result = o["result"]?.stringValue
        sentOn = o["sent_on"]?.stringValue
        history = (o["history"]?.arrayValue ?? []).compactMap { h in
            guard let s = h["status"]?.stringValue.flatMap(CommandStatus.init(rawValue:)),
                  let t = h["time"]?.stringValue.flatMap(Timestamp.init(iso8601:)) else { return nil }
            return Change(status: s, time: t)
        }
    }
}
