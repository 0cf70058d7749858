import PluginCatalog
import LocgateCLI

// The command line with every built-in plugin. A build with plugins of its own does the same with
// a registry it extended (Docs/Plugins.md, "Your own binary").
await LocgateCommand.main(registry: BuiltinPlugins.registry)
