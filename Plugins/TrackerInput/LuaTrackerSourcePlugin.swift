import GatewayCore
import LuaRuntime
import TrackerProtocols

/// Configuration of the `lua_tracker` source.
public struct LuaTrackerSourceConfiguration: Sendable, Hashable {
    public var common: TrackerSourceConfiguration
    /// The protocol script's path.
    public var script = ""
    public var limits = LuaState.Limits()
}

/// The `lua_tracker` source: devices whose protocol is a Lua script (`frame` and `decode`,
/// see Docs/Plugins.md), on the shared listening layer: sockets, the allow-list, limits, the
/// unacknowledged window and answers after the commit are native.
public enum LuaTrackerSourcePlugin: SourcePlugin {
    static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5039)
    static let maxFrameBytes = 4_096

    public static let udp = Option("udp", default: false,
        "Listen for UDP datagrams (one frame each, answered to its sender) instead of TCP connections; the connection limits then do not apply.")

    public static let info = PluginInfo(
        type: "lua_tracker", kind: .source,
        summary: "Devices whose protocol is a Lua script (it frames the bytes and decodes each frame into an identity, positions and an answer); the listening layer keeps the sockets, limits, allow-list and answers after the commit.",
        folder: "TrackerInput",
        options: TrackerSourceConfiguration.optionSpecs(defaultListen: defaultListen, maxFrameBytes: maxFrameBytes, identifier: "device id") + [
            OptionSpec("script", "path", required: true, "The protocol script, defining frame(buffer) and decode(frame, session), and encode_command(command, session) with command_types for devices that take commands (Docs/Plugins.md); validate compiles it and reports errors with file and line."),
            udp.spec, LuaOptions.maxInstructions.spec, LuaOptions.maxMemory.spec,
        ],
        sample: #"{ "type": "lua_tracker", "script": "wialon-ips.lua", "listen": "0.0.0.0:5039", "devices": { "353976013445485": "truck-2" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> LuaTrackerSourceConfiguration {
        let useUDP = options.read(udp)
        var c = LuaTrackerSourceConfiguration(common: .read(&options, defaultListen: defaultListen, maxFrameBytes: maxFrameBytes, udp: useUDP))
        c.script = LuaOptions.scriptPath(&options)
        c.limits = LuaOptions.read(&options)
        return c
    }

    public static func claims(of configuration: LuaTrackerSourceConfiguration) -> [String] { configuration.common.claims }

    /// Over TCP, when the script encodes commands (`encode_command` and its `command_types`).
    public static func carriesCommands(_ configuration: LuaTrackerSourceConfiguration) -> Bool {
        guard !configuration.common.udp, let script = try? load(configuration) else { return false }
        return !script.commandTypes.isEmpty
    }

    static func load(_ configuration: LuaTrackerSourceConfiguration) throws(LuaScriptError) -> LuaScript {
        try LuaScript(path: configuration.script, limits: configuration.limits, required: ["frame", "decode"], optional: ["encode_command"])
    }

    public static func checkEnvironment(_ configuration: LuaTrackerSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings = configuration.common.environmentFindings(context: context)
        do {
            _ = try load(configuration)
        } catch {
            findings.append(context.error("script", error.description))
        }
        return findings
    }

    public static func makeSource(_ configuration: LuaTrackerSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        let script = try load(configuration)
        let limits = TrackerLimits(maxFrameBytes: configuration.common.listener.maxFrameBytes)
        let stats = context.stats
        return configuration.common.makeSource(protocolName: "Lua (\(configuration.script))", context: context) {
            LuaCodec(script: script, limits: limits, stats: stats)
        }
    }
}
