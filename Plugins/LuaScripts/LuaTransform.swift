import EnvironmentChecks
import GatewayCore
import LuaRuntime

/// Runs each position through a Lua function, `process(position, state)`, which returns it
/// (changed or not), a list of positions, or nil to drop it.
///
/// `state` is the device's own table (`position.device`, else the source): whatever the script
/// keeps there is saved through the state store after the device's positions are handled and
/// restored after a restart (``StatefulTransform``, as JSON: strings, numbers, booleans and
/// nested tables). A late position (marked `late` by its source or a transform before, see
/// ``LateFixes``) gets a copy, so it never changes the device's state.
///
/// A call that raises an error, runs past `max_instructions` or allocates past `max_memory_mb`
/// is counted (`lua.errors.error`, `.budget`, `.memory`), logged at most once a minute per kind,
/// and handled by `on_error`. A return value that is not a position, a list or nil is an error
/// too. The script file is checked every `reload` (wall clock): a changed file is compiled and
/// replaces the running script, keeping every device's state; one that does not compile is
/// logged with its file and line and the old script keeps running.
public struct LuaTransform: StatefulTransform {
    public let configuration: LuaTransformConfiguration
    private let context: ComponentContext
    private var script: LuaScript
    private var function: LuaReference
    /// Each device's state table, by device key.
    private var states: [String: LuaReference] = [:]
    private var changed: Set<String> = []
    private var recording = false
    /// `on_error: "stop"` after a failure: the script is not run until its file changes.
    private var stopped = false
    private var logLimit = LogRateLimit()

    public init(configuration: LuaTransformConfiguration, context: ComponentContext) throws {
        self.configuration = configuration
        self.context = context
        script = try LuaScript(path: configuration.script, limits: configuration.limits, required: [configuration.function])
        guard let function = script.function(configuration.function) else { throw LuaScriptError("no function") }
        self.function = function
    }

    public mutating func process(_ position: Position, into output: inout [Position]) {
        if stopped {
            drop("stopped")
            return
        }
        let now = context.clock.now().milliseconds
        guard script.breaker.allows(now: now) else {
            context.stats.count("lua.skipped")
            handle(position, into: &output, dropReason: "script_suspended")
            return
        }
        let device = position.deviceKey
        let late = position.attributes[LateFixes.attribute] == "true"
        let state = late ? copyOfState(device) : stateTable(device)
        defer { if late { script.state.release(state) } }
        let result: [Position]?
        do {
            result = try script.state.call(function, results: 1) { stack in
                LuaPosition.push(position, on: stack)
                stack.push(state)
                return 2
            } read: { stack, base in
                LuaPosition.read(stack, at: base, original: position)
            }
        } catch {
            failed(error, position, into: &output)
            return
        }
        guard let positions = result else {
            failed(LuaFailure.badReturn("\(configuration.function)() returned something that is not a position, a list of positions or nil"),
                   position, into: &output)
            return
        }
        script.breaker.succeeded()
        if !late, recording { changed.insert(device) }
        if positions.isEmpty { drop("script") }
        output.append(contentsOf: positions)
    }

    private func drop(_ reason: String) {
        context.stats.addDropped(1)
        context.stats.count("dropped.\(reason)")
    }

    private mutating func failed(_ failure: LuaFailure, _ position: Position, into output: inout [Position]) {
        context.stats.count("lua.errors.\(failure.kind.rawValue)")
        let now = context.clock.now().milliseconds
        if let suppressed = logLimit.allow(failure.kind.rawValue, now: now) {
            context.logger.warning("\(configuration.function)() failed (\(failure.kind.rawValue)): \(failure.message)" + LogRateLimit.suffix(suppressed))
        }
        if configuration.onError == .stop {
            stopped = true
            context.logger.error("the script is stopped after a failure (on_error: stop): positions are dropped until \(configuration.script) changes")
            drop("stopped")
            return
        }
        if script.breaker.failed(now: now) {
            context.stats.count("lua.suspensions")
            context.logger.warning("\(configuration.function)() failed \(LuaBreaker.threshold) times in a row: not run for \(script.breaker.suspendedUntil - now) ms (positions \(configuration.onError == .pass ? "pass unchanged" : "are dropped"))")
        }
        handle(position, into: &output, dropReason: "script_error")
    }

    /// What `on_error` does with a position the script did not handle.
    private func handle(_ position: Position, into output: inout [Position], dropReason: String) {
        switch configuration.onError {
        case .pass: output.append(position)
        case .drop, .stop: drop(dropReason)
        }
    }

    /// The device's state table, made on its first position.
    private mutating func stateTable(_ device: String) -> LuaReference {
        if let state = states[device] { return state }
        let state = script.state.newTableReference()
        states[device] = state
        return state
    }

    /// A copy of the device's state for a late position (released after the call).
    private func copyOfState(_ device: String) -> LuaReference {
        guard let state = states[device], let saved = script.state.inspect(state, { LuaJSON.read($0, at: $1) }),
              Self.fitsTheSlack(saved)
        else { return script.state.newTableReference() }
        return script.state.makeReference { LuaJSON.push(saved, on: $0) }
    }

    /// Whether a state is small enough to be built outside the script's memory account.
    static func fitsTheSlack(_ value: JSONValue) -> Bool {
        var budget = LuaState.slack / 64
        func walk(_ v: JSONValue) {
            budget -= 1
            guard budget > 0 else { return }
            switch v {
            case .string(let s): budget -= s.utf8.count / 64
            case .array(let items): items.forEach(walk)
            case .object(let object): object.forEach { budget -= $0.key.utf8.count / 64; walk($0.value) }
            default: break
            }
        }
        walk(value)
        return budget > 0
    }

    // MARK: - Reloading the script

    public var tickInterval: Duration? { configuration.reload }

    public mutating func tick(now: Timestamp, into output: inout [Position]) { reloadIfChanged() }

    /// Compiles the script again when its file changed; device states move to the new script.
    public mutating func reloadIfChanged() {
        guard FileSignature(path: configuration.script) != script.signature else { return }
        let next: LuaScript
        do {
            next = try LuaScript(path: configuration.script, limits: configuration.limits, required: [configuration.function])
        } catch {
            context.stats.count("lua.reload_failed")
            context.logger.error("script reload failed, the previous script keeps running: \(error)")
            return
        }
        var moved: [String: LuaReference] = [:]
        for (device, state) in states {
            guard let saved = script.state.inspect(state, { LuaJSON.read($0, at: $1) }), Self.fitsTheSlack(saved) else { continue }
            moved[device] = next.state.makeReference { LuaJSON.push(saved, on: $0) }
        }
        script = next
        function = next.function(configuration.function) ?? function
        states = moved
        stopped = false
        context.stats.count("lua.reloads")
        context.logger.info("script reloaded: \(configuration.script)")
    }

    // MARK: - State (each device's table, as JSON)

    public var stateFormat: String { "lua/1" }
    public mutating func recordStateChanges() { recording = true }

    public mutating func takeChangedDevices() -> [String] {
        defer { changed.removeAll(keepingCapacity: true) }
        return Array(changed)
    }

    public func snapshot(device: String) -> JSONValue? {
        guard let state = states[device], let saved = script.state.inspect(state, { LuaJSON.read($0, at: $1) }),
              saved != .object(JSONObject())
        else { return nil }
        return saved
    }

    public mutating func restore(device: String, from snapshot: JSONValue) throws(StateSnapshotError) {
        guard case .object = snapshot else { throw StateSnapshotError("a Lua state is a JSON object") }
        guard Self.fitsTheSlack(snapshot) else { throw StateSnapshotError("too large to restore") }
        if let old = states[device] { script.state.release(old) }
        states[device] = script.state.makeReference { LuaJSON.push(snapshot, on: $0) }
    }
}

extension LuaFailure {
    /// A script that returned what the component cannot use (counted as an error).
    static func badReturn(_ message: String) -> LuaFailure { LuaFailure(kind: .runtime, message: message) }
}
