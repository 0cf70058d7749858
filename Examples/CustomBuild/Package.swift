// swift-tools-version:6.0
// A locgate binary with one plugin of its own, built from a package that depends on locgate
// (here by path) instead of forking it. See Docs/Plugins.md, "Your own binary".
import PackageDescription

let package = Package(
    name: "locgate-custom",
    platforms: [.macOS(.v15)],
    products: [.executable(name: "locgate-custom", targets: ["CustomLocgate"])],
    dependencies: [.package(name: "locgate", path: "../..")],
    targets: [
        .target(name: "BeaconInput", dependencies: [.product(name: "GatewayCore", package: "locgate")]),
        // Target names must be unique across the package graph (locgate has a target `locgate`);
        // its executable is `locgate-custom`, beside the stock `locgate` that the dependency also builds.
        .executableTarget(name: "CustomLocgate", dependencies: [
            "BeaconInput",
            .product(name: "LocgateCLI", package: "locgate"),
            .product(name: "PluginCatalog", package: "locgate"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
