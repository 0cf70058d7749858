import EnvironmentChecks
import Foundation
import GatewayCore

/// A script file compiled into its own sandboxed state (``LuaState``), with the functions a
/// component calls. Loading it runs its top-level code under the same limits as a call.
public final class LuaScript: @unchecked Sendable {
    // Unchecked Sendable: a script is used by one component on one thread at a time (a
    // transform on its task, a source's codecs on the I/O loop).
    public let path: String
    public let state: LuaState
    /// The file as it was read, to see when it changes.
    public let signature: FileSignature
    private let functions: [String: LuaReference]

    /// Reads and compiles `path`; every name in `required` must be a global function the
    /// script defines, `optional` ones are looked up too.
    public init(path: String, limits: LuaState.Limits, required: [String], optional: [String] = []) throws(LuaScriptError) {
        self.path = path
        signature = FileSignature(path: path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LuaScriptError("\(path): \(FileCheck.readProblem(path) ?? "cannot read it")")
        }
        guard let source = String(data: data, encoding: .utf8) else { throw LuaScriptError("\(path): not UTF-8 text") }
        do {
            state = try LuaState(limits: limits)
            try state.run(source, name: "@" + path)
        } catch {
            throw LuaScriptError(error.message)
        }
        var found: [String: LuaReference] = [:]
        for name in required + optional {
            if let reference = state.function(name) {
                found[name] = reference
            } else if required.contains(name) {
                throw LuaScriptError("\(path): defines no function \(name)(…)")
            }
        }
        functions = found
        commandTypes = found["encode_command"] == nil ? [] : try Self.commandTypes(state, path: path)
    }

    public func function(_ name: String) -> LuaReference? { functions[name] }

    /// The command types a device protocol's `encode_command` carries: its `command_types` list.
    public let commandTypes: Set<CommandType>

    /// `command_types = { "text", "custom" }`: required beside `encode_command`, every name a type.
    private static func commandTypes(_ state: LuaState, path: String) throws(LuaScriptError) -> Set<CommandType> {
        let names: [String]? = state.global("command_types") { stack, index in
            guard stack.kind(at: index) == .table else { return nil }
            return (0..<stack.length(at: index)).map { k in stack.withItem(Int64(k + 1), of: index) { stack.string(at: $0) ?? "" } }
        }
        guard let names, !names.isEmpty else {
            throw LuaScriptError("\(path): defines encode_command(…) but no command_types list (such as { \"text\", \"custom\" })")
        }
        var types: Set<CommandType> = []
        for name in names {
            guard let type = CommandType(rawValue: name) else {
                throw LuaScriptError("\(path): command_types: unknown type \"\(name)\"; types: \(CommandType.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            types.insert(type)
        }
        return types
    }

    /// Failures in a row suspend the script for a while (shared by every user of the script).
    public var breaker = LuaBreaker()
}

/// Keeps a failing script from costing its budget on every call: after ``threshold`` failures
/// in a row the script is not run for a while (1 s, doubling up to a minute while it keeps
/// failing), so a script that loops or allocates without end costs a few budgets a second, not
/// one per position, and the pipeline keeps its rate.
public struct LuaBreaker: Sendable {
    public static let threshold = 5
    private var failures = 0
    private var backoff: Int64 = 1_000
    /// Until when (ms, the component's clock) the script is not run.
    public private(set) var suspendedUntil: Int64 = 0

    public init() {}

    public func allows(now: Int64) -> Bool { now >= suspendedUntil }

    public mutating func succeeded() {
        failures = 0
        backoff = 1_000
    }

    /// Counts a failure; true when it suspends the script (then `suspendedUntil` says until when).
    public mutating func failed(now: Int64) -> Bool {
        failures += 1
        guard failures >= Self.threshold else { return false }
        failures = 0
        suspendedUntil = now + backoff
        backoff = min(backoff * 2, 60_000)
        return true
    }
}

/// A script that does not load: what is wrong, with `<file>:<line>:` where Lua gives one.
public struct LuaScriptError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What a component does when its script fails on a position.
public enum LuaErrorAction: String, Sendable, Hashable, CaseIterable {
    /// The position goes on unchanged.
    case pass
    /// The position is dropped (`dropped.script_error`).
    case drop
    /// The script is not run again until its file changes: every position is dropped
    /// (`dropped.stopped`) so nothing half-processed goes on.
    case stop
}

/// The options every Lua component has.
public enum LuaOptions {
    public static let maxInstructions = Option("max_instructions", default: 1_000_000, in: 1_000...1_000_000_000,
        "Lua VM instructions one call of the script may run; past it the call is stopped and counted (lua.errors.budget). One call into a C function (string.rep, a pattern match) counts as one.")
    public static let maxMemory = Option("max_memory_mb", default: 64, in: 1...4_096,
        "Megabytes the script's Lua state may hold; an allocation past it fails the call with a memory error (lua.errors.memory).")

    public static func read(_ options: inout OptionReader) -> LuaState.Limits {
        LuaState.Limits(instructions: options.read(maxInstructions), memoryBytes: options.read(maxMemory) << 20)
    }

    /// `script`: a path, required; reported when missing.
    public static func scriptPath(_ options: inout OptionReader) -> String {
        guard options.has("script"), let path = options.filePath("script") else {
            options.report("script", "required: the path of the Lua script")
            return ""
        }
        return path
    }
}
