import GatewayCore
import LuaRuntime
import EnvironmentChecks

/// Options of the `lua` transform.
public struct LuaTransformConfiguration: Sendable, Hashable {
    /// The script's path.
    public var script = ""
    /// The global function called for each position.
    public var function = LuaTransformPlugin.function.defaultValue
    public var limits = LuaState.Limits()
    var onError = LuaTransformPlugin.onError.defaultValue
    /// How often the script file is checked for changes; nil for never.
    public var reload: Duration? = LuaTransformPlugin.reload.defaultValue
}

/// The `lua` transform: positions through a Lua script, with per-device state kept across
/// restarts, in a sandbox with an instruction budget and a memory limit.
public enum LuaTransformPlugin: TransformPlugin {
    static let function = Option("function", default: "process",
        "The global function called as function(position, state) for each position; it returns the position (changed or not), a list of positions, or nil to drop it.")
    static let onError = Option("on_error", default: LuaErrorAction.pass,
        "When a call fails (an error, the instruction budget, the memory limit, a bad return): pass the position on unchanged, drop it, or stop (drop every position until the script file changes).")
    static let reload = Option("reload", default: Duration.seconds(2),
        "How often (wall clock) the script file's modification time and size are checked; a change compiles it again and swaps it in, keeping device state. 0 disables.")

    public static let info = PluginInfo(
        type: "lua", kind: .transform,
        summary: "Runs each position through a Lua 5.4 script (change it, split it, drop it, compute attributes, emit events), with per-device state kept across restarts; sandboxed: no files, processes or network, an instruction budget and a memory limit per call.",
        folder: "LuaScripts",
        options: [
            OptionSpec("script", "path", required: true, "The Lua script (text; bytecode is refused). validate compiles it and reports errors with file and line."),
            function.spec, onError.spec, LuaOptions.maxInstructions.spec, LuaOptions.maxMemory.spec, reload.spec,
        ],
        sample: #"{ "type": "lua", "inputs": ["trackers"], "script": "ignition.lua", "on_error": "pass" }"#
    )

    public static func configure(_ options: inout OptionReader) -> LuaTransformConfiguration {
        var c = LuaTransformConfiguration()
        c.script = LuaOptions.scriptPath(&options)
        c.function = options.read(function)
        c.onError = options.read(onError)
        c.limits = LuaOptions.read(&options)
        let every = options.read(reload)
        c.reload = every > .zero ? every : nil
        return c
    }

    /// `validate`: the script compiles, runs its top-level code and defines the function.
    public static func checkEnvironment(_ configuration: LuaTransformConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        do {
            _ = try LuaScript(path: configuration.script, limits: configuration.limits, required: [configuration.function])
            return [context.info("script", "\(FileCheck.absolute(configuration.script)) compiles and defines \(configuration.function)()")]
        } catch {
            return [context.error("script", error.description)]
        }
    }

    public static func makeTransform(_ configuration: LuaTransformConfiguration, context: ComponentContext) throws -> any PositionTransform {
        try LuaTransform(configuration: configuration, context: context)
    }
}
