import GatewayCore

/// Configuration of the `beacon` source.
public struct BeaconSourceConfiguration: Sendable {
    public var latitude = 0.0
    public var longitude = 0.0
    public var device = "beacon"
    public var interval: Duration = .seconds(10)
    /// Positions to emit before the input ends; 0 for no end.
    public var count = 0
}

/// A fixed position every `interval`: a surveyed reference point or a parked asset without a
/// receiver, so the rest of a fleet pipeline (fences, uploads, dashboards) sees it like any device.
public enum BeaconSourcePlugin: SourcePlugin {
    public static let info = PluginInfo(
        type: "beacon", kind: .source,
        summary: "Emits a fixed, configured position every interval (a surveyed point, a parked asset).",
        folder: "Examples/CustomBuild/Sources/BeaconInput",
        options: [
            OptionSpec("lat", "number", required: true, "Latitude, degrees WGS84."),
            OptionSpec("lon", "number", required: true, "Longitude, degrees WGS84."),
            OptionSpec("device", "string", default: "\"beacon\"", "Device id of the positions."),
            OptionSpec("interval", "duration", default: "\"10s\"", "Time between positions."),
            OptionSpec("count", "integer", default: "0", "Positions before the input ends; 0 never ends."),
        ],
        sample: #"{ "type": "beacon", "lat": 31.2304, "lon": 121.4737, "device": "depot-gate", "interval": "30s" }"#
    )

    public static func configure(_ options: inout OptionReader) -> BeaconSourceConfiguration {
        var c = BeaconSourceConfiguration()
        for (key, limit) in [("lat", 90.0), ("lon", 180.0)] {
            guard let v = options.double(key) else {
                if !options.has(key) { options.report(key, "required option is missing") }
                continue
            }
            guard abs(v) <= limit else {
                options.report(key, "must be between -\(Int(limit)) and \(Int(limit))")
                continue
            }
            if key == "lat" { c.latitude = v } else { c.longitude = v }
        }
        c.device = options.string("device") ?? c.device
        c.interval = options.duration("interval", default: c.interval, minimum: .milliseconds(10))
        c.count = options.int("count", default: 0, in: 0...1_000_000_000)
        return c
    }

    public static func makeSource(_ configuration: BeaconSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        BeaconSource(configuration: configuration, context: context)
    }
}

struct BeaconSource: PositionSource {
    let configuration: BeaconSourceConfiguration
    let context: ComponentContext

    func run(output: SourceOutput) async throws {
        var n = 0
        while configuration.count == 0 || n < configuration.count {
            let now = context.clock.now()
            await output.emit([Position(time: now, latitude: configuration.latitude, longitude: configuration.longitude,
                                        mode: .threeD, quality: .manual, source: context.id, device: configuration.device,
                                        id: "\(context.id)-\(now.milliseconds)")])
            n += 1
            if configuration.count != 0 && n == configuration.count { break }
            try await context.clock.sleep(for: configuration.interval)
        }
    }
}
