import ConsoleOutput
import FileOutput
import FileReplay
import GatewayCore
import HTTPOutput

/// The one list of built-in plugins. A plugin folder under `Plugins/` that is missing here fails
/// `BuiltinPluginsTests`.
public enum BuiltinPlugins {
    public static let registry: PluginRegistry = {
        var r = PluginRegistry()
        // Sources
        r.register(source: FileReplayPlugin.self)
        // Transforms
        // Sinks
        r.register(sink: FileSinkPlugin.self)
        r.register(sink: HTTPSinkPlugin.self)
        r.register(sink: StdoutSinkPlugin.self)
        return r
    }()
}
