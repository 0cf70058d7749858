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
    // plugin against GatewayCore, register it beside BuiltinPlugins.registry (module PluginCatalog) and run
    // LocgateCommand.main(registry:) from an executable of your own.
    products: [
        .executable(name: "locgate", targets: ["locgate"]),
        .library(name: "GatewayCore", targets: ["GatewayCore"]),
        .library(name: "GatewayRuntime", targets: ["GatewayRuntime"]),
        .library(name: "NMEA", targets: ["NMEA"]),
        .library(name: "Geodesy", targets: ["Geodesy"]),
        .library(name: "PluginCatalog", targets: ["PluginCatalog"]),
        .library(name: "LocgateCLI", targets: ["LocgateCLI"]),
        .library(name: "GatewayTesting", targets: ["GatewayTesting"]),
    ],
    targets: [
        // The lock every module guards shared state with: a pthread mutex ThreadSanitizer sees
        // (Synchronization.Mutex's futex is invisible to it; Sources/Locking/Locked.swift says more).
        .target(name: "Locking", swiftSettings: settings),

        // Core: the data model, plugin protocols and configuration (no I/O, no C).
        .target(name: "GatewayCore", dependencies: ["Locking"], swiftSettings: settings),

        // Runtime: runs a configured pipeline (tasks, buffers, routing, reload).
        .target(name: "GatewayRuntime", dependencies: ["GatewayCore", "SQLiteState", "DeviceCommands", "Locking"], swiftSettings: settings),

        // Engines: protocol and geometry code the plugins share, each testable on its own.
        .target(name: "NMEA", dependencies: ["GatewayCore"], swiftSettings: settings),
        // Receivers that speak binary: UBX frames and messages (u-blox), RTCM 3 framing and
        // CRC-24Q, the stream decoder that splits NMEA, UBX and RTCM on one port, and the NTRIP
        // client that brings corrections to it.
        .target(name: "RTCM", swiftSettings: settings),
        .target(name: "UBX", dependencies: ["GatewayCore"], swiftSettings: settings),
        .target(name: "ReceiverStream", dependencies: ["GatewayCore", "NMEA", "RTCM", "UBX"], swiftSettings: settings),
        // Receiver configuration writes: CFG-VALSET by key name or raw UBX from a source's `init`,
        // sent one at a time at open and after every reconnect, each ACK-ACK/ACK-NAK/timeout reported.
        // The NTRIP client: caster connections (NTRIP 1 and 2, chunked), the sourcetable, GGA
        // upstream, back-off; RTCM frames checked and handed to a writer (the serial source's port).
        .target(name: "NTRIP", dependencies: ["GatewayCore", "NMEA", "RTCM", "SystemIO", "Locking"], swiftSettings: settings),
        .target(name: "ReceiverSetup", dependencies: ["GatewayCore", "UBX", "ReceiverStream"], swiftSettings: settings),
        .target(name: "Geodesy", swiftSettings: settings),
        // Every encoding of positions: the JSON object (PositionJSON) and the sinks' text formats
        // (jsonl, json_array, csv, geojson, gpx), body templates and field mappings, OwnTracks, times.
        .target(name: "PositionEncoding", dependencies: ["GatewayCore", "Locking"], swiftSettings: settings),
        // The sinks' queues (SQLite and memory) and the delivery loops every network sink shares.
        .target(name: "DeliveryEngine", dependencies: ["EnvironmentChecks", "GatewayCore", "SQLiteStorage", "SystemIO", "Locking"], swiftSettings: settings),
        // SQLite connections and statements: the one module that talks to SQLite's C API.
        .target(name: "SQLiteStorage", dependencies: ["EnvironmentChecks", "CSQLite", "SystemIO"], swiftSettings: settings),
        // Per-device state of the stateful transforms in an SQLite file (settings.state.path, or
        // beside a durable sink's queue), what GatewayRuntime opens and `locgate state` reads.
        .target(name: "SQLiteState", dependencies: ["EnvironmentChecks", "GatewayCore", "SQLiteStorage", "SystemIO", "Locking"], swiftSettings: settings),
        // What `locgate validate` checks on the machine (files, directories, free space, peers), and
        // the path and size texts the components report with.
        .target(name: "EnvironmentChecks", dependencies: ["SystemIO"], swiftSettings: settings),
        // POSIX I/O for plugins: sockets, resolution, cancellable waits on descriptors, blocking work off the pool.
        .target(name: "SystemIO", dependencies: ["CUV", "GatewayCore", "Locking"], swiftSettings: settings),
        // What every source reading a stream in sessions shares (tcp, udp, exec, gpsd, serial): the
        // reconnect loop with its backoff, the idle flush and stall timers, waits on the component's clock.
        .target(name: "StreamSessions", dependencies: ["GatewayCore", "SystemIO"], swiftSettings: settings),
        // The machine's serial ports (libserialport's enumeration) for `locgate ports` and the serial source.
        .target(name: "SerialPorts", dependencies: ["CSerialPort"], swiftSettings: settings),
        // Tracker protocols (Teltonika, GT06, H02, JT/T 808, GPS103, watch, @Track, Meitrack, Suntech): framers, decoders and answers on bytes, no sockets.
        .target(name: "TrackerProtocols", dependencies: ["GatewayCore"], swiftSettings: settings),
        // The listening side: devices' connections on the I/O loop, their identity, limits and
        // answers written after commit; used by every source that devices call into.
        .target(name: "DeviceIntake", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "TrackerProtocols", "Locking"], swiftSettings: settings),
        // Commands to devices: the board that queues, sends and tracks them (stores are engines').
        .target(name: "DeviceCommands", dependencies: ["GatewayCore", "Locking"], swiftSettings: settings),
        .target(name: "NATSClient", dependencies: ["GatewayCore", "CNats", "Locking"], swiftSettings: settings),
        // Per-device state in a NATS JetStream Key-Value bucket (settings.state.nats), registered
        // beside the plugins so GatewayRuntime opens it without depending on NATSClient.
        .target(name: "NATSState", dependencies: ["GatewayCore", "NATSClient", "Locking"], swiftSettings: settings),
        .target(name: "MQTTClient", dependencies: ["GatewayCore", "SystemIO", "CMosquitto", "Locking"], swiftSettings: settings),
        // The HTTP server of the operator API and the http_server source (libmicrohttpd, epoll, suspended requests).
        .target(name: "HTTPServing", dependencies: ["CMicroHTTPD", "GatewayCore", "SystemIO", "Locking"], swiftSettings: settings),
        // A sandboxed Lua 5.4 interpreter (memory limit, instruction budget), positions as Lua tables,
        // script files with their limits, and the codec that runs a device protocol written in Lua.
        .target(name: "LuaRuntime", dependencies: ["GatewayCore", "CLua", "EnvironmentChecks", "TrackerProtocols"], swiftSettings: settings),

        // C libraries from Debian, one system library target each; only one Swift file per library talks to it.
        .systemLibrary(name: "CSerialPort", path: "Sources/CSerialPort", pkgConfig: "libserialport", providers: [.apt(["libserialport-dev"])]),
        .systemLibrary(name: "CProj", path: "Sources/CProj", pkgConfig: "proj", providers: [.apt(["libproj-dev", "proj-data"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CNats", path: "Sources/CNats", pkgConfig: "libnats", providers: [.apt(["libnats-dev"])]),
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CUV", path: "Sources/CUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CPostgres", path: "Sources/CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CLua", path: "Sources/CLua", pkgConfig: "lua5.4", providers: [.apt(["liblua5.4-dev"])]),

        // Plugins: one folder under Plugins/ each, registered in PluginCatalog (BuiltinPlugins.registry).
        plugin("FileInput", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "NMEA", "PositionEncoding", "ReceiverStream"]),
        plugin("SerialInput", dependencies: ["StreamSessions", "EnvironmentChecks", "GatewayCore", "SystemIO", "NMEA", "CSerialPort", "SerialPorts", "ReceiverStream", "ReceiverSetup", "NTRIP"]),
        plugin("GpsdInput", dependencies: ["StreamSessions", "EnvironmentChecks", "GatewayCore", "SystemIO", "NMEA"]),
        plugin("NetworkInput", dependencies: ["StreamSessions", "EnvironmentChecks", "GatewayCore", "SystemIO", "NMEA", "DeviceIntake", "TrackerProtocols", "Locking", "ReceiverStream"]),
        plugin("HTTPInput", dependencies: ["EnvironmentChecks", "GatewayCore", "DeviceIntake", "HTTPServing", "PositionEncoding", "SystemIO", "Locking"]),
        plugin("TrackerInput", dependencies: ["GatewayCore", "DeviceIntake", "TrackerProtocols", "SystemIO", "LuaRuntime", "Locking"]),
        plugin("ExecInput", dependencies: ["StreamSessions", "GatewayCore", "NMEA", "PositionEncoding", "SystemIO", "Locking", "ReceiverStream"]),
        plugin("NATSInput", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "NATSClient", "PositionEncoding", "Locking"]),
        plugin("MQTTInput", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "MQTTClient", "PositionEncoding", "Locking"]),
        plugin("Coordinates", dependencies: ["GatewayCore", "Geodesy", "CProj"]),
        plugin("Filters", dependencies: ["GatewayCore", "Geodesy"]),
        plugin("Geofence", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "Geodesy"]),
        plugin("Motion", dependencies: ["GatewayCore", "Geodesy"]),
        plugin("FileOutput", dependencies: ["EnvironmentChecks", "GatewayCore", "PositionEncoding", "SystemIO"]),
        plugin("ConsoleOutput", dependencies: ["GatewayCore", "PositionEncoding", "SystemIO"]),
        plugin("HTTPOutput", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "DeliveryEngine", "CZlib", "CCurl", "PositionEncoding", "Locking"]),
        plugin("NATSOutput", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "DeliveryEngine", "NATSClient", "PositionEncoding", "Locking"]),
        plugin("MQTTOutput", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "DeliveryEngine", "MQTTClient", "PositionEncoding"]),
        plugin("PostgresOutput", dependencies: ["EnvironmentChecks", "GatewayCore", "SystemIO", "DeliveryEngine", "Geodesy", "CPostgres"]),
        plugin("CommandRules", dependencies: ["GatewayCore"]),
        plugin("LuaScripts", dependencies: ["EnvironmentChecks", "GatewayCore", "LuaRuntime"]),
        .target(name: "PluginCatalog", dependencies: ["GatewayCore", "FileInput", "FileOutput", "ConsoleOutput", "NetworkInput", "ExecInput", "Coordinates", "Filters", "Geofence", "Motion", "SerialInput", "GpsdInput", "HTTPOutput", "NATSOutput", "NATSInput", "MQTTOutput", "MQTTInput", "TrackerInput", "HTTPInput", "PostgresOutput", "NATSState", "CommandRules", "LuaScripts"], swiftSettings: settings),

        // The command line and the service around it: operator API, maps, the `locgate` executable.
        .target(name: "OperatorEndpoints", dependencies: ["GatewayCore", "GatewayRuntime", "HTTPServing", "MapRendering", "Geodesy", "PositionEncoding", "Locking"], swiftSettings: settings),
        // The map page (Leaflet from Debian's libjs-leaflet, inlined) and `locgate map`, which fills it from recorded files.
        .target(name: "MapRendering", dependencies: ["GatewayCore", "Geodesy"], swiftSettings: settings),
        .target(name: "TrackMap", dependencies: ["GatewayCore", "Geodesy", "Locking", "MapRendering"], swiftSettings: settings),
        // A pipeline run as a service: signals, reload from its file, the operator API, systemd.
        .target(name: "GatewayProcess", dependencies: ["GatewayCore", "GatewayRuntime", "OperatorEndpoints", "CSystemd", "Locking"], swiftSettings: settings),
        .target(name: "LocgateCLI", dependencies: ["GatewayCore", "GatewayRuntime", "GatewayProcess", "SQLiteState", "SerialPorts", "SystemIO", "TrackMap", "Locking", "NTRIP"],
                resources: [.embedInCode("Resources/demo-bundg_zeus_9.nmea")], swiftSettings: settings),
        .executableTarget(name: "locgate", dependencies: ["LocgateCLI", "PluginCatalog"], swiftSettings: settings),

        // Test support shipped as libraries (peers, fakes, clocks) for this package and plugin authors.
        .target(name: "GatewayTesting", dependencies: ["GatewayCore", "GatewayRuntime", "CSQLite", "Locking"], swiftSettings: settings),
        .target(name: "NATSTesting", dependencies: ["NATSClient", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .target(name: "MQTTTesting", dependencies: ["GatewayTesting"], swiftSettings: settings),

        // Tests: one target per library or plugin, plus LocgateTests for the binary end to end.
        .testTarget(name: "LockingTests", dependencies: ["Locking"], swiftSettings: settings),
        .testTarget(name: "PluginCatalogTests", dependencies: ["PluginCatalog", "GatewayCore"], swiftSettings: settings),
        .testTarget(name: "ConsoleOutputTests", dependencies: ["ConsoleOutput", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "CoordinatesTests", dependencies: ["Coordinates", "GatewayCore", "Geodesy", "Locking"], swiftSettings: settings),
        .testTarget(name: "DeviceIntakeTests", dependencies: ["DeviceIntake", "TrackerProtocols", "SystemIO", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "ExecInputTests", dependencies: ["ExecInput", "GatewayTesting", "GatewayCore", "GatewayRuntime", "PluginCatalog"], swiftSettings: settings),
        .testTarget(name: "FileOutputTests", dependencies: ["FileOutput", "GatewayCore", "GatewayRuntime", "GatewayTesting", "PositionEncoding"], swiftSettings: settings),
        .testTarget(name: "FileInputTests", dependencies: ["EnvironmentChecks", "FileInput", "GatewayCore", "GatewayTesting", "SystemIO"], exclude: ["Fixtures"], swiftSettings: settings),
        .testTarget(name: "FiltersTests", dependencies: ["Filters", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "GatewayCoreTests", dependencies: ["GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "PositionEncodingTests", dependencies: ["PositionEncoding", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "GatewayRuntimeTests", dependencies: ["GatewayCore", "GatewayRuntime", "SQLiteState", "GatewayTesting", "PluginCatalog", "Locking"], swiftSettings: settings),
        .testTarget(name: "GatewayTestingTests", dependencies: ["GatewayTesting", "GatewayCore", "GatewayRuntime", "Locking"], swiftSettings: settings),
        .testTarget(name: "GeodesyTests", dependencies: ["Geodesy", "GatewayTesting"], resources: [.copy("Fixtures")], swiftSettings: settings),
        .testTarget(name: "MotionTests", dependencies: ["Motion", "FileInput", "GatewayCore", "GatewayTesting"], exclude: ["Fixtures", "Support"], swiftSettings: settings),
        .testTarget(name: "GeofenceTests", dependencies: ["Geofence", "Geodesy", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "GpsdInputTests", dependencies: ["GpsdInput", "GatewayCore", "GatewayTesting", "Locking"], resources: [.copy("Fixtures")], swiftSettings: settings),
        .testTarget(name: "HTTPServingTests", dependencies: ["HTTPServing", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "HTTPOutputTests", dependencies: ["HTTPOutput", "DeliveryEngine", "GatewayCore", "GatewayRuntime", "GatewayTesting", "PositionEncoding"], exclude: ["Support"], swiftSettings: settings),
        .testTarget(name: "LocgateTests", dependencies: ["Geodesy", "GatewayCore", "GatewayTesting", "PositionEncoding"], swiftSettings: settings),
        .testTarget(name: "MQTTInputTests", dependencies: ["MQTTInput", "MQTTTesting", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "MQTTOutputTests", dependencies: ["MQTTOutput", "MQTTClient", "MQTTTesting", "GatewayCore", "GatewayRuntime", "GatewayTesting", "PluginCatalog", "PositionEncoding", "Locking"], swiftSettings: settings),
        .testTarget(name: "NATSOutputTests", dependencies: ["NATSOutput", "NATSClient", "NATSTesting", "DeliveryEngine", "GatewayCore", "GatewayRuntime", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "NATSStateTests", dependencies: ["NATSState", "NATSClient", "NATSTesting", "GatewayCore", "GatewayRuntime", "PluginCatalog", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "NATSInputTests", dependencies: ["NATSInput", "NATSClient", "NATSTesting", "GatewayCore", "GatewayTesting", "PositionEncoding", "Locking"], swiftSettings: settings),
        .testTarget(name: "PostgresOutputTests", dependencies: ["PostgresOutput", "DeliveryEngine", "Geodesy", "GatewayCore", "GatewayRuntime", "GatewayTesting", "PluginCatalog"], swiftSettings: settings),
        .testTarget(name: "NMEATests", dependencies: ["NMEA", "GatewayCore", "GatewayTesting", "PositionEncoding"], resources: [.copy("Fixtures")], swiftSettings: settings),
        .testTarget(name: "NTRIPTests", dependencies: ["NTRIP", "RTCM", "NMEA", "SystemIO", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "ReceiverSetupTests", dependencies: ["ReceiverSetup", "ReceiverStream", "UBX", "NMEA", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "ReceiverStreamTests", dependencies: ["ReceiverStream", "UBX", "NMEA", "GatewayCore", "GatewayTesting"], exclude: ["Fixtures"], swiftSettings: settings),
        .testTarget(name: "NetworkInputTests", dependencies: ["NetworkInput", "GatewayTesting", "GatewayCore"], swiftSettings: settings),
        .testTarget(name: "OperatorEndpointsTests", dependencies: ["OperatorEndpoints", "HTTPServing", "GatewayCore", "GatewayRuntime", "GatewayTesting", "PluginCatalog", "Geodesy", "MapRendering", "Locking"], exclude: ["Support"], swiftSettings: settings),
        .testTarget(name: "DeliveryEngineTests", dependencies: ["DeliveryEngine", "SQLiteStorage", "GatewayCore", "GatewayRuntime", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "SQLiteStateTests", dependencies: ["SQLiteState", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        // Model-based and power-cut proofs of the outbox (`make proof` runs them larger).
        .testTarget(name: "OutboxProofTests", dependencies: ["DeliveryEngine", "CSQLite", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "SerialInputTests", dependencies: ["SerialInput", "SerialPorts", "GatewayCore", "GatewayTesting", "NMEA", "UBX", "RTCM"], exclude: ["Support"], swiftSettings: settings),
        .testTarget(name: "SystemIOTests", dependencies: ["SystemIO", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "HTTPInputTests", dependencies: ["HTTPInput", "PositionEncoding", "GatewayCore", "GatewayTesting", "DeviceCommands"], swiftSettings: settings),
        .testTarget(name: "CommandRulesTests", dependencies: ["CommandRules", "DeviceCommands", "GatewayCore", "GatewayRuntime", "PluginCatalog", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "DeviceCommandsTests", dependencies: ["DeviceCommands", "SQLiteState", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "LuaRuntimeTests", dependencies: ["LuaRuntime", "GatewayCore"], swiftSettings: settings),
        .testTarget(name: "LuaScriptsTests", dependencies: ["LuaScripts", "LuaRuntime", "TrackerProtocols", "GatewayCore", "GatewayTesting"], swiftSettings: settings),
        .testTarget(name: "TrackerInputTests", dependencies: ["TrackerInput", "DeviceIntake", "DeviceCommands", "GatewayCore", "GatewayTesting", "Locking"], swiftSettings: settings),
        .testTarget(name: "TrackerProtocolsTests", dependencies: ["TrackerProtocols", "GatewayCore", "GatewayTesting"], resources: [.copy("Fixtures")], swiftSettings: settings),
        .testTarget(name: "TrackMapTests", dependencies: ["TrackMap", "MapRendering", "PluginCatalog", "FileInput", "Geofence", "Geodesy", "GatewayCore", "GatewayTesting"], swiftSettings: settings),

    ],
    swiftLanguageModes: [.v6]
)

// MARK: - Benchmark tools (`make bench` only)

// The benchmarks' own executables exist only when a benchmark script asks for them
// (LOCGATE_BENCH=1): `swift build` and `swift test` never build them. Benchmarks/README.md.
if Context.environment["LOCGATE_BENCH"] == "1" {
    /// One benchmark executable in `Benchmarks/<name>`.
    func benchmark(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
        .executableTarget(name: name, dependencies: dependencies, path: "Benchmarks/\(name)", swiftSettings: settings)
    }
    package.targets += [
        benchmark("GeofenceBenchmark", ["GatewayCore", "Geodesy", "Geofence"]),
        benchmark("MotionBenchmark", ["GatewayCore", "Motion"]),
        benchmark("CoordinatesBenchmark", ["Coordinates", "GatewayCore", "Geodesy"]),
        benchmark("NATSBenchmark", ["GatewayCore", "NATSClient", "PositionEncoding"]),
        benchmark("HTTPServingBenchmark", ["HTTPServing"]),
        benchmark("ReceiverStreamBenchmark", ["GatewayCore", "Locking", "NMEA", "NTRIP", "ReceiverStream", "RTCM", "UBX"]),
    ]
}

// MARK: - Fuzz targets (`make fuzz` only)

// libFuzzer targets exist only when `make fuzz` asks for them (LOCGATE_FUZZ=1, in its own scratch
// path): `swift build` and `swift test` never see them. They live in this manifest rather than a
// package of their own so that they are built by the same SwiftPM graph (the C libraries, the
// `package` declarations of the modules they drive). Fuzz/README.md says why and how.
if Context.environment["LOCGATE_FUZZ"] == "1" {
    /// One libFuzzer executable in `Fuzz/<name>`, named `Fuzz<name>`.
    func fuzzTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
        .executableTarget(name: "Fuzz\(name)", dependencies: ["FuzzSupport"] + dependencies, path: "Fuzz/\(name)", swiftSettings: settings)
    }
    package.targets += [
        // Declares libFuzzer's LLVMFuzzerRunDriver (the toolchain ships no header for it).
        .target(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer", "GatewayCore", "PositionEncoding", "TrackerProtocols"], path: "Fuzz/Support", swiftSettings: settings),
        fuzzTarget("TeltonikaTCP", ["TrackerProtocols"]),
        fuzzTarget("TeltonikaUDP", ["TrackerProtocols"]),
        fuzzTarget("GT06", ["TrackerProtocols"]),
        fuzzTarget("H02", ["TrackerProtocols"]),
        fuzzTarget("JT808", ["TrackerProtocols"]),
        fuzzTarget("GPS103", ["TrackerProtocols"]),
        fuzzTarget("Watch", ["TrackerProtocols"]),
        fuzzTarget("GL200", ["TrackerProtocols"]),
        fuzzTarget("Meitrack", ["TrackerProtocols"]),
        fuzzTarget("Suntech", ["TrackerProtocols"]),
        fuzzTarget("LuaProtocol", ["LuaRuntime", "TrackerProtocols"]),
        fuzzTarget("NMEA", ["NMEA", "GatewayCore"]),
        fuzzTarget("JSON", ["GatewayCore"]),
        fuzzTarget("Configuration", ["PluginCatalog", "GatewayCore"]),
        fuzzTarget("GpsdReports", ["GpsdInput", "GatewayCore"]),
        fuzzTarget("GPX", ["FileInput", "GatewayCore"]),
        fuzzTarget("JSONLines", ["FileInput", "GatewayCore"]),
        fuzzTarget("OwnTracks", ["PositionEncoding", "GatewayCore"]),
        fuzzTarget("MQTTMessages", ["MQTTInput", "GatewayCore"]),
        fuzzTarget("NATSMessages", ["NATSInput", "NATSClient", "GatewayCore"]),
        fuzzTarget("GeoJSONFences", ["Geofence", "Geodesy", "GatewayCore"]),
        fuzzTarget("HTTPRequests", ["HTTPInput", "HTTPServing", "PositionEncoding", "GatewayCore"]),
        fuzzTarget("StateSnapshots", ["Filters", "Geofence", "GatewayCore"]),
        fuzzTarget("ReceiverStream", ["ReceiverStream", "UBX", "NMEA", "GatewayCore"]),
        fuzzTarget("UBX", ["ReceiverStream", "UBX", "NMEA", "GatewayCore"]),
        fuzzTarget("RTCM", ["RTCM"]),
        fuzzTarget("NTRIP", ["NTRIP", "RTCM"]),
    ]
}
