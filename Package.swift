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
    // Products for packages that add plugins without a fork: depend on this package, write a
    // plugin against GatewayCore, register it beside BuiltinPlugins.registry and run
    // LocgateCommand.main(registry:) from an executable of your own.
    products: [
        .executable(name: "locgate", targets: ["locgate"]),
        .library(name: "GatewayCore", targets: ["GatewayCore"]),
        .library(name: "GatewayRuntime", targets: ["GatewayRuntime"]),
        .library(name: "NMEA", targets: ["NMEA"]),
        .library(name: "Geodesy", targets: ["Geodesy"]),
        .library(name: "BuiltinPlugins", targets: ["BuiltinPlugins"]),
        .library(name: "LocgateCLI", targets: ["LocgateCLI"]),
        .library(name: "GatewayTesting", targets: ["GatewayTesting"]),
    ],
    targets: [
        .target(name: "GatewayCore", swiftSettings: settings),
        .target(name: "GatewayRuntime", dependencies: ["GatewayCore"], swiftSettings: settings),
        .target(name: "NMEA", dependencies: ["GatewayCore"], swiftSettings: settings),
        // Environment checks for `locgate validate` (files, directories, peers): I/O kept out of GatewayCore.
        .target(name: "Preflight", dependencies: ["GatewayCore"], swiftSettings: settings),
        .target(name: "Geodesy", swiftSettings: settings),
        .systemLibrary(name: "CProj", path: "Sources/CProj", pkgConfig: "proj", providers: [.apt(["libproj-dev", "proj-data"])]),
        plugin("FileReplay", dependencies: ["GatewayCore", "Preflight", "NMEA"]),
        plugin("FileOutput", dependencies: ["GatewayCore", "Preflight"]),
        plugin("ConsoleOutput", dependencies: ["GatewayCore"]),
        .target(name: "PollWakeup", swiftSettings: settings),
        plugin("NetworkNMEA", dependencies: ["GatewayCore", "Preflight", "NMEA", "PollWakeup"]),
        plugin("ExecSource", dependencies: ["GatewayCore", "NMEA", "PollWakeup"]),
        .target(name: "GatewayTesting", dependencies: ["GatewayCore", "GatewayRuntime"], swiftSettings: settings),
        plugin("Coordinates", dependencies: ["GatewayCore", "Geodesy", "CProj"]),
        plugin("Filters", dependencies: ["GatewayCore", "Geodesy"]),
        plugin("Geofence", dependencies: ["GatewayCore", "Preflight", "Geodesy"]),
        .executableTarget(name: "GeofenceBenchmark", dependencies: ["GatewayCore", "Geodesy", "Geofence"], path: "Benchmarks/GeofenceBenchmark", swiftSettings: settings),
        .testTarget(name: "GatewayRuntimeTests", dependencies: ["GatewayCore", "GatewayRuntime", "GatewayTesting", "BuiltinPlugins"], swiftSettings: settings),
        .testTarget(name: "LocgateTests", dependencies: ["Geodesy", "GatewayTesting"], swiftSettings: settings),
        .systemLibrary(name: "CSerialPort", path: "Sources/CSerialPort", pkgConfig: "libserialport", providers: [.apt(["libserialport-dev"])]),
        plugin("SerialSource", dependencies: ["GatewayCore", "Preflight", "NMEA", "CSerialPort"]),
        .target(name: "BuiltinPlugins", dependencies: ["GatewayCore", "FileReplay", "FileOutput", "ConsoleOutput", "NetworkNMEA", "ExecSource", "Coordinates", "Filters", "Geofence", "SerialSource", "GpsdSource", "HTTPOutput", "NATSOutput", "NATSSource", "MQTTOutput", "MQTTInput"], swiftSettings: settings),
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .target(name: "LocgateCLI", dependencies: ["GatewayCore", "GatewayRuntime", "SerialSource", "OperatorAPI", "CSystemd", "TrackMap"], swiftSettings: settings),
        // The map page (Leaflet from Debian's libjs-leaflet, inlined) and `locgate map`, which fills it from recorded files.
        .target(name: "MapRendering", dependencies: ["GatewayCore", "Geodesy"], swiftSettings: settings),
        .target(name: "TrackMap", dependencies: ["GatewayCore", "Geodesy", "FileReplay", "Geofence", "MapRendering"], swiftSettings: settings),
        .testTarget(name: "TrackMapTests", dependencies: ["TrackMap", "MapRendering", "Geofence", "Geodesy", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .executableTarget(name: "locgate", dependencies: ["LocgateCLI", "BuiltinPlugins"], swiftSettings: settings),
        .testTarget(name: "FileReplayTests", dependencies: ["FileReplay", "GatewayCore", "GatewayTesting", "Preflight"], swiftSettings: settings),
        .testTarget(name: "GatewayCoreTests", dependencies: ["GatewayCore"], swiftSettings: settings),
        .testTarget(name: "GatewayTestingTests", dependencies: ["GatewayTesting", "GatewayCore", "GatewayRuntime"], swiftSettings: settings),
        .testTarget(name: "NetworkNMEATests", dependencies: ["NetworkNMEA", "GatewayTesting", "GatewayCore"], swiftSettings: settings),
        .testTarget(name: "ExecSourceTests", dependencies: ["ExecSource", "GatewayTesting", "GatewayCore", "GatewayRuntime", "BuiltinPlugins"], swiftSettings: settings),
        .testTarget(name: "PollWakeupTests", dependencies: ["PollWakeup"], swiftSettings: settings),
        .testTarget(name: "BuiltinPluginsTests", dependencies: ["BuiltinPlugins", "GatewayCore"], swiftSettings: settings),
        .executableTarget(name: "CoordinatesBenchmark", dependencies: ["Coordinates", "GatewayCore", "Geodesy"], path: "Benchmarks/CoordinatesBenchmark", swiftSettings: settings),
        .testTarget(name: "CoordinatesTests", dependencies: ["Coordinates", "GatewayCore", "Geodesy"], swiftSettings: settings),
        .testTarget(name: "FiltersTests", dependencies: ["Filters", "GatewayCore"], swiftSettings: settings),
        plugin("GpsdSource", dependencies: ["GatewayCore", "Preflight", "NMEA"]),
        .testTarget(name: "GpsdSourceTests", dependencies: ["GpsdSource", "GatewayCore", "GatewayTesting", "NMEA"], resources: [.copy("Fixtures")], swiftSettings: settings),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .target(name: "Outbox", dependencies: ["GatewayCore", "CSQLite", "Preflight"], swiftSettings: settings),
        .testTarget(name: "OutboxTests", dependencies: ["Outbox", "GatewayCore", "GatewayRuntime", "GatewayTesting"], swiftSettings: settings),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        plugin("HTTPOutput", dependencies: ["GatewayCore", "Preflight", "Outbox", "CZlib", "CCurl", "PositionEncoding"]),
        .testTarget(name: "HTTPOutputTests", dependencies: ["HTTPOutput", "Outbox", "GatewayCore", "GatewayRuntime", "GatewayTesting"], exclude: ["Support"], swiftSettings: settings),
        .testTarget(name: "NMEATests", dependencies: ["NMEA", "GatewayCore", "GatewayTesting"], resources: [.copy("Fixtures")], swiftSettings: settings),
        .testTarget(name: "GeofenceTests", dependencies: ["Geofence", "Geodesy", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "GeodesyTests", dependencies: ["Geodesy", "GatewayTesting"], resources: [.copy("Fixtures")], swiftSettings: settings),
        .systemLibrary(name: "CNats", path: "Sources/CNats", pkgConfig: "libnats", providers: [.apt(["libnats-dev"])]),
        .target(name: "NATSClient", dependencies: ["GatewayCore", "CNats"], swiftSettings: settings),
        .executableTarget(name: "NATSBenchmark", dependencies: ["GatewayCore", "NATSClient"], path: "Benchmarks/NATSBenchmark", swiftSettings: settings),
        plugin("NATSOutput", dependencies: ["GatewayCore", "Preflight", "Outbox", "NATSClient"]),
        .testTarget(name: "NATSOutputTests", dependencies: ["NATSOutput", "NATSClient", "NATSTesting", "Outbox", "GatewayCore", "GatewayRuntime", "GatewayTesting"], swiftSettings: settings),
        .target(name: "NATSTesting", dependencies: ["NATSClient", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        plugin("NATSSource", dependencies: ["GatewayCore", "Preflight", "NATSClient"]),
        .testTarget(name: "NATSSourceTests", dependencies: ["NATSSource", "NATSClient", "NATSTesting", "GatewayCore", "GatewayRuntime", "GatewayTesting", "BuiltinPlugins"], swiftSettings: settings),
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .target(name: "MQTTClient", dependencies: ["GatewayCore", "CMosquitto"], swiftSettings: settings),
        .target(name: "MQTTTesting", dependencies: ["GatewayTesting"], swiftSettings: settings),
        .target(name: "PositionEncoding", dependencies: ["GatewayCore"], swiftSettings: settings),
        plugin("MQTTOutput", dependencies: ["GatewayCore", "Preflight", "Outbox", "MQTTClient", "PositionEncoding"]),
        .testTarget(name: "MQTTOutputTests", dependencies: ["MQTTOutput", "MQTTClient", "MQTTTesting", "Outbox", "GatewayCore", "GatewayRuntime", "GatewayTesting", "BuiltinPlugins"], swiftSettings: settings),
        plugin("MQTTInput", dependencies: ["GatewayCore", "Preflight", "MQTTClient", "PositionEncoding"]),
        .testTarget(name: "MQTTInputTests", dependencies: ["MQTTInput", "MQTTClient", "MQTTTesting", "PositionEncoding", "GatewayCore", "GatewayRuntime", "GatewayTesting", "BuiltinPlugins"], swiftSettings: settings),
        .testTarget(name: "SerialSourceTests", dependencies: ["SerialSource", "GatewayCore", "GatewayTesting", "NMEA"], exclude: ["Support"], swiftSettings: settings),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .target(name: "OperatorAPI", dependencies: ["GatewayCore", "GatewayRuntime", "CMicroHTTPD", "MapRendering", "Geodesy", "Geofence"], swiftSettings: settings),
        .testTarget(name: "OperatorAPITests", dependencies: ["OperatorAPI", "GatewayCore", "GatewayRuntime", "GatewayTesting", "BuiltinPlugins"], exclude: ["Support"], swiftSettings: settings),
    ],
    swiftLanguageModes: [.v6]
)
