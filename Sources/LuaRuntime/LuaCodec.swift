import GatewayCore
import TrackerProtocols

/// A device protocol written in Lua: the script frames the bytes and decodes each frame; this
/// codec turns what it returns into the listening layer's messages, so sockets, limits,
/// identity, the unacknowledged window and answers after the commit stay native.
///
///     frame(buffer)            → n (the first n bytes are a frame), nil (wait for more),
///                                or -n (n bytes are not a frame: skipped, counted)
///     decode(frame, session)   → { device = "…", login = true, positions = { … },
///                                  answer = "…", refused = "…", kind = "…", error = "checksum" }
///
/// `buffer` is what the connection holds, up to `max_frame_bytes`; `session` is a table the
/// connection keeps between frames (a device's id after its login, a protocol version).
/// A decoded table with `error` is a bad frame (its reason one of `checksum`, `length`,
/// `syntax`, `unsupported`, counted, never answered); with `login`, the device identifies
/// itself (`answer` once it is allowed, `refused` — or nothing — and the connection closed
/// when not); with `positions`, the answer waits until every position was handled end to end;
/// anything else is answered at once. A script error in
/// `frame` closes the connection (the device reconnects and sends again); in `decode` the
/// frame is a bad frame. Each is counted (`lua.errors.<kind>`).
///
/// Commands, when the script defines them:
///
///     command_types = { "text", "custom" }          the types it carries
///     encode_command(command, session)  → bytes, answer
///                                         (answer: what the device's reply names; false: the
///                                          protocol has none, `delivered` once written; nil: any
///                                          reply answers it)
///     decode(…) → { reply = { command = "…", ok = false, text = "…" } }   the device's answer
///
/// `command` holds `type`, `id` and the command's parameters (`text`, `data`, `interval`…). A
/// reply whose `command` is the `answer` the command went with (or any, when it had none) is its
/// `done`, `failed` with `ok = false`; `text` is its result.
public struct LuaCodec: TrackerCodec {
    let script: LuaScript
    let limits: TrackerLimits
    let stats: ComponentStats?
    /// This connection's `session` table.
    private var session: LuaReference?
    /// Commands encoded, newest last, with what their reply names (nil: any reply; "": none).
    private var sent: [(id: String, bytes: [UInt8], answer: String?)] = []

    public init(script: LuaScript, limits: TrackerLimits, stats: ComponentStats?) {
        self.script = script
        self.limits = limits
        self.stats = stats
    }

    static let reasons: Set<String> = ["checksum", "length", "too_large", "syntax", "stop_bytes", "unsupported"]

    public mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        guard !bytes.isEmpty, let frameFunction = script.function("frame"), let decodeFunction = script.function("decode") else {
            return .needMore
        }
        guard script.breaker.allows(now: now.milliseconds) else {
            // The script failed again and again: not run for a while. The connection is closed
            // unanswered; its device reconnects and sends it again later.
            stats?.count("lua.skipped")
            return .invalid(TrackerFrameError("syntax", "the script is suspended after failing \(LuaBreaker.threshold) times in a row"),
                            consumed: bytes.count, close: true)
        }
        let window = UnsafeRawBufferPointer(rebasing: bytes[0..<min(bytes.count, limits.maxFrameBytes)])
        let length: Int64?
        do {
            length = try script.state.call(frameFunction, results: 1) { stack in
                stack.push(bytes: window)
                return 1
            } read: { stack, base in
                stack.integer(at: base)
            }
        } catch {
            return failed(error, consumed: bytes.count, close: true, now: now)
        }
        guard let length, length != 0 else {
            if bytes.count >= limits.maxFrameBytes {
                return .invalid(TrackerFrameError("too_large", "no frame within \(limits.maxFrameBytes) bytes"), consumed: bytes.count, close: true)
            }
            return .needMore
        }
        if length < 0 {
            return .invalid(TrackerFrameError("syntax", "the script skipped \(-length) bytes"), consumed: Int(min(-length, Int64(bytes.count))), close: false)
        }
        guard length <= Int64(window.count) else {
            return failed(LuaFailure(kind: .runtime, message: "frame() returned \(length), past the \(window.count) bytes it was given"),
                          consumed: bytes.count, close: true, now: now)
        }
        let frame = UnsafeRawBufferPointer(rebasing: bytes[0..<Int(length)])
        let session = sessionTable()
        let decoded: Result<TrackerMessage, TrackerFrameError>?
        do {
            decoded = try script.state.call(decodeFunction, results: 1) { stack in
                stack.push(bytes: frame)
                stack.push(session)
                return 2
            } read: { stack, base in
                Self.message(stack, at: base)
            }
        } catch {
            return failed(error, consumed: Int(length), close: false, now: now)
        }
        switch decoded {
        case .success(let message)?:
            script.breaker.succeeded()
            return .message(message, consumed: Int(length))
        case .failure(let error)?: return .invalid(error, consumed: Int(length), close: false)
        case nil:
            return failed(LuaFailure(kind: .runtime, message: "decode() returned something that is not a table"), consumed: Int(length), close: false, now: now)
        }
    }

    public mutating func idle(now: Timestamp, ending: Bool) -> TrackerIdleOutput {
        if ending, let session {
            script.state.release(session)
            self.session = nil
        }
        return TrackerIdleOutput()
    }

    // MARK: - Commands

    public var commandTypes: Set<CommandType> { script.commandTypes }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        guard let function = script.function("encode_command"), script.breaker.allows(now: now.milliseconds) else { return nil }
        let session = sessionTable()
        let encoded: (bytes: [UInt8]?, answer: String?)
        do {
            encoded = try script.state.call(function, results: 2) { stack in
                stack.newTable(fields: Int32(command.parameters.count + 2))
                for (name, value) in command.parameters where name != "type" && name != "id" {
                    stack.push(value)
                    stack.setField(name, of: -2)
                }
                stack.push(command.type.rawValue)
                stack.setField("type", of: -2)
                stack.push(command.id)
                stack.setField("id", of: -2)
                stack.push(session)
                return 2
            } read: { stack, base in
                let bytes = stack.kind(at: base) == .string ? stack.withBytes(at: base) { Array($0) } : nil
                let answer: String? = switch stack.kind(at: base + 1) {
                case .boolean: stack.bool(at: base + 1) ? nil : ""
                case .string: stack.string(at: base + 1)
                default: nil
                }
                return (bytes ?? nil, answer)
            }
        } catch {
            stats?.count("lua.errors.\(error.kind.rawValue)")
            if script.breaker.failed(now: now.milliseconds) { stats?.count("lua.suspensions") }
            return nil
        }
        guard let bytes = encoded.bytes, !bytes.isEmpty else { return nil }
        sent.append((command.id, bytes, encoded.answer))
        if sent.count > 8 { sent.removeFirst() }
        return bytes
    }

    public func awaitsReply(to command: DeviceCommand) -> Bool {
        sent.last { $0.id == command.id }?.answer != ""
    }

    /// A reply naming what the command went with (any reply, when it went with nothing).
    public func outcome(of reply: TrackerCommandReply, sent bytes: [UInt8]) -> CommandOutcome? {
        guard let command = sent.last(where: { $0.bytes == bytes }), command.answer != "" else { return nil }
        if let answer = command.answer, Array(answer.utf8) != reply.reference { return nil }
        return reply.code == 1 ? .failed(reply.text ?? "failed") : .done(reply.text ?? "done")
    }

    private mutating func sessionTable() -> LuaReference {
        if let session { return session }
        let made = script.state.newTableReference()
        session = made
        return made
    }

    private func failed(_ failure: LuaFailure, consumed: Int, close: Bool, now: Timestamp) -> TrackerDecodeResult {
        stats?.count("lua.errors.\(failure.kind.rawValue)")
        if script.breaker.failed(now: now.milliseconds) { stats?.count("lua.suspensions") }
        return .invalid(TrackerFrameError("syntax", "script \(failure.kind.rawValue): \(failure.message)"), consumed: max(1, consumed), close: close)
    }

    /// The message a decoded table describes; nil when it is not a table.
    static func message(_ stack: LuaStack, at index: Int32) -> Result<TrackerMessage, TrackerFrameError>? {
        guard stack.kind(at: index) == .table else { return nil }
        func text(_ name: StaticString) -> String? { stack.withField(name, of: index) { stack.string(at: $0) } }
        func bytes(_ name: StaticString) -> [UInt8]? { stack.withField(name, of: index) { stack.withBytes(at: $0) { Array($0) } } ?? nil }
        func flag(_ name: StaticString) -> Bool { stack.withField(name, of: index) { stack.bool(at: $0) } }
        if let reason = text("error") {
            let word = reasons.contains(reason) ? reason : "syntax"
            return .failure(TrackerFrameError(word, "the script: \(reason)"))
        }
        let device = text("device").flatMap { $0.isEmpty || $0.utf8.count > 64 ? nil : $0 }
        let answer = bytes("answer")
        let kind = text("kind").map { String($0.prefix(32)) }
        if flag("login") {
            guard let device else { return .failure(TrackerFrameError("syntax", "a login without a device")) }
            return .success(.identification(deviceID: device, accepted: answer ?? [], refused: bytes("refused")))
        }
        let positions = stack.withField("positions", of: index) { field -> [Position]? in
            stack.kind(at: field) == .nil ? [] : LuaPosition.read(stack, at: field, original: Position())
        }
        guard let positions else { return .failure(TrackerFrameError("syntax", "positions that are not a list of positions")) }
        // `reply = { command = "…", ok = false, text = "…" }`: the device answered a command.
        let reply = stack.withField("reply", of: index) { field -> TrackerCommandReply? in
            guard stack.kind(at: field) == .table else { return nil }
            let command = stack.withField("command", of: field) { stack.string(at: $0) } ?? ""
            let failed = stack.withField("ok", of: field) { stack.kind(at: $0) == .boolean && !stack.bool(at: $0) }
            let text = stack.withField("text", of: field) { stack.string(at: $0) }
            return TrackerCommandReply(reference: Array(command.utf8), code: failed ? 1 : 0, text: text)
        }
        if !positions.isEmpty {
            var records = TrackerRecords(deviceID: device, positions: positions, answer: answer, kind: kind)
            records.reply = reply
            return .success(.records(records))
        }
        if let reply { return .success(.commandReply(kind: kind ?? "reply", deviceID: device, reply: reply, answer: answer)) }
        return .success(.control(kind: kind ?? "other", deviceID: device, answer: answer))
    }
}
