import CommandRules
import ConsoleOutput
import ExecInput
import Coordinates
import FileOutput
import FileInput
import Filters
import GatewayCore
import NetworkInput
import Geofence
import Motion
import SerialInput
import GpsdInput
import HTTPOutput
import LuaScripts
import HTTPInput
import MQTTInput
import MQTTOutput
import NATSOutput
import NATSInput
import NATSState
import PostgresOutput
import TrackerInput

/// The one list of built-in plugins. A plugin folder under `Plugins/` that is missing here fails
/// `PluginCatalogTests`.
public enum BuiltinPlugins {
    public static let registry: PluginRegistry = {
        var r = PluginRegistry()
        // Sources
        r.register(source: ExecSourcePlugin.self)
        r.register(source: FileReplayPlugin.self)
        r.register(source: TCPNMEAPlugin.self)
        r.register(source: UDPNMEAPlugin.self)
        r.register(source: SerialSourcePlugin.self)
        r.register(source: GpsdSourcePlugin.self)
        r.register(source: MQTTSourcePlugin.self)
        r.register(source: NATSSourcePlugin.self)
        r.register(source: TeltonikaSourcePlugin.self)
        r.register(source: GT06SourcePlugin.self)
        r.register(source: H02SourcePlugin.self)
        r.register(source: JT808SourcePlugin.self)
        r.register(source: GPS103SourcePlugin.self)
        r.register(source: WatchSourcePlugin.self)
        r.register(source: GL200SourcePlugin.self)
        r.register(source: MeitrackSourcePlugin.self)
        r.register(source: SuntechSourcePlugin.self)
        r.register(source: LuaTrackerSourcePlugin.self)
        r.register(source: HTTPServerSourcePlugin.self)
        // Transforms
        r.register(transform: CoordinatesPlugin.self)
        r.register(transform: DedupePlugin.self)
        r.register(transform: DistanceFilterPlugin.self)
        r.register(transform: JumpFilterPlugin.self)
        r.register(transform: QualityFilterPlugin.self)
        r.register(transform: SetPlugin.self)
        r.register(transform: ThrottlePlugin.self)
        r.register(transform: GeofencePlugin.self)
        r.register(transform: MotionPlugin.self)
        r.register(transform: LuaTransformPlugin.self)
        // Sinks
        r.register(sink: FileSinkPlugin.self)
        r.register(sink: HTTPSinkPlugin.self)
        r.register(sink: MQTTSinkPlugin.self)
        r.register(sink: NATSSinkPlugin.self)
        r.register(sink: PostgresSinkPlugin.self)
        r.register(sink: StdoutSinkPlugin.self)
        r.register(sink: CommandsSinkPlugin.self)
        // Places for per-device state besides an SQLite file (settings.state.<key>)
        r.register(stateBackend: NATSStateBackend.self)
        return r
    }()
}
