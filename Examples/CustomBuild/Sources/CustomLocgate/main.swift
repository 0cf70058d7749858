import BeaconInput
import PluginCatalog
import LocgateCLI

// Every built-in plugin, plus this package's `beacon` source.
var registry = BuiltinPlugins.registry
registry.register(source: BeaconSourcePlugin.self)
await LocgateCommand.main(registry: registry)
