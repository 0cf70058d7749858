import ConsoleOutput
import FileOutput
import FileReplay
import GatewayCore
import Geofence

/// The one list of built-in plugins. A plugin folder under `Plugins/` that is missing here fails
/// `BuiltinPluginsTests`.
public enum BuiltinPlugins {
    public static let registry: PluginRegistry = {
        var r = PluginRegistry()
        // Sources
        r.register(source: FileReplayPlugin.self)
        // Transforms
        r.register(transform: GeofencePlugin.self)
        // Sinks
        r.register(sink: FileSinkPlugin.self)
        r.register(sink: StdoutSinkPlugin.self)
        return r
    }()
}
