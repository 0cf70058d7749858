// swift-tools-version:6.0
import PackageDescription

/// Every target gets the same settings (Swift 6 language mode is set package-wide below).
let settings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

/// A gateway plugin: an ordinary library target in `Plugins/<name>`, with its tests in `Tests/<name>Tests`.
func plugin(_ name: String, dependencies: [Target.Dependency]) -> Target {
    .target(name: name, dependencies: dependencies, path: "Plugins/\(name)", exclude: ["README.md"], swiftSettings: settings)
}

let package = Package(
    name: "locgate",
    platforms: [.macOS(.v15)],
    products: [

    ],
    targets: [
        .target(name: "GatewayCore", swiftSettings: settings),
        .target(name: "GatewayRuntime", dependencies: ["GatewayCore"], swiftSettings: settings),
        .target(name: "NMEA", dependencies: ["GatewayCore"], swiftSettings: settings),
        .target(name: "Geodesy", swiftSettings: settings),
        plugin("FileReplay", dependencies: ["GatewayCore", "NMEA"]),
        plugin("FileOutput", dependencies: ["GatewayCore"]),
        plugin("ConsoleOutput", dependencies: ["GatewayCore"]),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        plugin("HTTPOutput", dependencies: ["GatewayCore", "CSQLite", "CZlib"]),
        .target(name: "BuiltinPlugins", dependencies: ["GatewayCore", "FileReplay", "FileOutput", "ConsoleOutput", "HTTPOutput"], swiftSettings: settings),
        .executableTarget(name: "locgate", dependencies: ["GatewayCore", "GatewayRuntime", "BuiltinPlugins"], swiftSettings: settings),
        .testTarget(name: "GatewayCoreTests", dependencies: ["GatewayCore"], swiftSettings: settings),
        .testTarget(name: "HTTPOutputTests", dependencies: ["HTTPOutput", "GatewayCore", "GatewayRuntime"], exclude: ["Support"], swiftSettings: settings),
        .testTarget(name: "NMEATests", dependencies: ["NMEA", "GatewayCore"], resources: [.copy("Fixtures")], swiftSettings: settings),
    ],
    swiftLanguageModes: [.v6]
)
