import GatewayCore

/// Options of a `motion` transform, as read from the configuration; the property defaults are
/// the declared options' defaults.
public struct MotionConfiguration: Sendable, Hashable {
    /// Metres a stopped device must move from its stop's centre to start moving, and that a device
    /// must stay within (around where it slowed down) for a stop.
    public var stopRadius = MotionPlugin.stopRadius.defaultValue
    /// Metres per second: a fix at this speed or faster is fast, one below it slow.
    public var movingSpeed = MotionPlugin.movingSpeed.defaultValue / 3.6
    /// Fast fixes for this long (position time) start a stopped device moving inside its radius,
    /// and break a stop that is not confirmed yet.
    public var movingDuration = MotionPlugin.movingDuration.defaultValue { didSet { ms.moving = movingDuration.milliseconds } }
    /// Time within the radius that makes a stop (and ends the trip before it).
    public var minStopDuration = MotionPlugin.minStopDuration.defaultValue { didSet { ms.minStop = minStopDuration.milliseconds } }
    /// A move is a trip once it covered this many metres along its fixes, or lasted `minTripDuration`.
    public var minTripDistance = MotionPlugin.minTripDistance.defaultValue
    public var minTripDuration = MotionPlugin.minTripDuration.defaultValue { didSet { ms.minTrip = minTripDuration.milliseconds } }
    /// No fix for this long (position time) is a stop: a trip ends at the last fix before it.
    public var gap = MotionPlugin.gap.defaultValue { didSet { ms.gap = gap.milliseconds } }
    /// Ignition decides trips too: none starts while the ignition is off, ignition off ends one.
    public var useIgnition = MotionPlugin.useIgnition.defaultValue
    /// Metres per second; nil: no overspeed unless a device or fence limit applies.
    public var speedLimit: Double?
    /// Metres per second by device id.
    public var deviceSpeedLimits: [String: Double] = [:]
    /// Metres per second by fence id (read from the `fences` attribute a geofence adds).
    public var fenceSpeedLimits: [String: Double] = [:]
    /// An overspeed episode shorter than this is not reported.
    public var overspeedMinDuration = MotionPlugin.overspeedMinDuration.defaultValue { didSet { ms.overspeedMin = overspeedMinDuration.milliseconds } }
    /// Time at or below the limit that does not end an episode.
    public var overspeedMaxDip = MotionPlugin.overspeedMaxDip.defaultValue { didSet { ms.overspeedDip = overspeedMaxDip.milliseconds } }
    /// Idling (ignition on during a stop) shorter than this is not reported.
    public var idleAfter = MotionPlugin.idleAfter.defaultValue { didSet { ms.idle = idleAfter.milliseconds } }
    /// Event kinds emitted (every kind is still tracked and counted).
    public var events = MotionPlugin.events.defaultValue
    /// Positions older than the device's newest: passed on marked or dropped, never used.
    public var late = LateFixes()

    /// The durations above in milliseconds, kept as they are set: a `Duration` converts through
    /// 128-bit arithmetic, and the machines compare several per position.
    struct Milliseconds: Sendable, Hashable {
        var moving = MotionPlugin.movingDuration.defaultValue.milliseconds
        var minStop = MotionPlugin.minStopDuration.defaultValue.milliseconds
        var minTrip = MotionPlugin.minTripDuration.defaultValue.milliseconds
        var gap = MotionPlugin.gap.defaultValue.milliseconds
        var overspeedMin = MotionPlugin.overspeedMinDuration.defaultValue.milliseconds
        var overspeedDip = MotionPlugin.overspeedMaxDip.defaultValue.milliseconds
        var idle = MotionPlugin.idleAfter.defaultValue.milliseconds
    }
    private(set) var ms = Milliseconds()

    /// The defaults.
    public init() {}

    /// Whether any overspeed limit is configured.
    var tracksOverspeed: Bool { speedLimit != nil || !deviceSpeedLimits.isEmpty || !fenceSpeedLimits.isEmpty }
}

/// The `motion` transform plugin.
public enum MotionPlugin: TransformPlugin {
    public static let stopRadius = Option("stop_radius_m", default: 100.0, in: 1...100_000,
        "Metres: a stopped device starts moving when a fix is farther than this from the centre of its stop's fixes; a stop needs the fixes from the first slow one on to stay this close to their centre. Larger than the receiver's drift.")
    public static let movingSpeed = Option("moving_speed_kmh", default: 5.0, in: 0.1...1000,
        "km/h: a fix with a reported speed at or above this is fast, below it slow. The last slow fix is where a trip starts, the first slow one where a stop may begin.")
    public static let movingDuration = Option("moving_duration", default: Duration.seconds(30), minimum: .zero,
        "Fast fixes for this long (position time) start a stopped device moving even inside stop_radius_m.")
    public static let minStopDuration = Option("min_stop_duration", default: Duration.seconds(300), minimum: .seconds(1),
        "How long a device must stay within stop_radius_m for a stop (Traccar's minimal parking duration).")
    public static let minTripDistance = Option("min_trip_distance_m", default: 500.0, in: 0...1e8,
        "A move becomes a trip once it covered this many metres along its fixes (or lasted min_trip_duration); a shorter one is part of the stop.")
    public static let minTripDuration = Option("min_trip_duration", default: Duration.seconds(300), minimum: .zero,
        "A move becomes a trip once it lasted this long (or covered min_trip_distance_m).")
    public static let gap = Option("gap", default: Duration.seconds(3600), minimum: .seconds(1),
        "No fix for this long (position time) is a stop: a trip ends at the last fix before it (Traccar's minimal no-data duration).")
    public static let useIgnition = Option("use_ignition", default: false,
        "Ignition decides trips too: no trip starts while the ignition attribute is \"false\", and \"false\" ends a trip at once.")
    /// Zero is off: ``MotionConfiguration/speedLimit`` is nil then.
    public static let speedLimit = Option("speed_limit_kmh", default: 0.0, in: 0...10_000, note: "off",
        "km/h: the overspeed limit of every device without a limit of its own.")
    public static let deviceSpeedLimits = limits("device_speed_limits_kmh",
        "Overspeed limits in km/h by device id: {\"truck-7\": 80}; before speed_limit_kmh.")
    public static let fenceSpeedLimits = limits("fence_speed_limits_kmh",
        "Overspeed limits in km/h by fence id, applied to positions whose fences attribute (a geofence transform before this one, action annotate) names the fence; the lowest wins, before any device limit.")
    public static let overspeedMinDuration = Option("overspeed_min_duration", default: Duration.seconds(10), minimum: .zero,
        "An overspeed episode (first to last fix above the limit) shorter than this is not reported.")
    public static let overspeedMaxDip = Option("overspeed_max_dip", default: Duration.seconds(10), minimum: .zero,
        "Time at or below the limit that does not end an overspeed episode: one event per episode, however it dips.")
    public static let idleAfter = Option("idle_after", default: Duration.seconds(300), minimum: .zero,
        "Idling (ignition on during a stop) at least this long is reported once it ends.")
    public static let events = Option("events", default: Set(PositionEvent.Kind.motionKinds), typeName: "array",
        "Event kinds to emit, any of \(PositionEvent.Kind.motionKinds.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")); the others are still tracked and counted.",
        jsonText: { kinds in JSONValue.array(PositionEvent.Kind.motionKinds.filter(kinds.contains).map { .string($0.rawValue) }).jsonText },
        read: { key, reader in
            guard let names = reader.stringArray(key) else { return nil }
            var kinds: Set<PositionEvent.Kind> = []
            for (i, name) in names.enumerated() {
                if let kind = PositionEvent.Kind(rawValue: name), PositionEvent.Kind.motionKinds.contains(kind) { kinds.insert(kind) } else {
                    reader.report("\(key)[\(i)]", "expected one of \(PositionEvent.Kind.motionKinds.map(\.rawValue).joined(separator: ", ")), got \"\(name)\"")
                }
            }
            return kinds
        })

    public static let info = PluginInfo(
        type: "motion", kind: .transform,
        summary: "Turns positions into what fleets act on: trips and stops (robust to GPS drift), ignition on/off, overspeed and idling, as events after the positions.",
        folder: "Motion",
        options: [
            stopRadius.spec, movingSpeed.spec, movingDuration.spec, minStopDuration.spec, minTripDistance.spec, minTripDuration.spec,
            gap.spec, useIgnition.spec, speedLimit.spec, deviceSpeedLimits.spec, fenceSpeedLimits.spec, overspeedMinDuration.spec,
            overspeedMaxDip.spec, idleAfter.spec, events.spec,
        ] + LateFixes.options,
        sample: #"{ "type": "motion", "inputs": ["receiver"], "stop_radius_m": 100, "min_stop_duration": "5m", "min_trip_distance_m": 500, "speed_limit_kmh": 90, "device_speed_limits_kmh": { "truck-7": 80 }, "idle_after": "10m", "events": ["trip_start", "trip_end", "stop_start", "stop_end", "ignition_on", "ignition_off", "overspeed", "idle"] }"#
    )

    public static func configure(_ options: inout OptionReader) -> MotionConfiguration {
        var c = MotionConfiguration()
        c.stopRadius = options.read(stopRadius)
        c.movingSpeed = options.read(movingSpeed) / 3.6
        c.movingDuration = options.read(movingDuration)
        c.minStopDuration = options.read(minStopDuration)
        c.minTripDistance = options.read(minTripDistance)
        c.minTripDuration = options.read(minTripDuration)
        c.gap = options.read(gap)
        if c.gap <= c.minStopDuration {
            options.report("gap", "must be longer than min_stop_duration (\(DurationText.format(c.minStopDuration))): a gap is a stop")
        }
        c.useIgnition = options.read(useIgnition)
        let limit = options.read(speedLimit)
        c.speedLimit = limit > 0 ? limit / 3.6 : nil
        c.deviceSpeedLimits = options.read(deviceSpeedLimits).mapValues { $0 / 3.6 }
        c.fenceSpeedLimits = options.read(fenceSpeedLimits).mapValues { $0 / 3.6 }
        c.overspeedMinDuration = options.read(overspeedMinDuration)
        c.overspeedMaxDip = options.read(overspeedMaxDip)
        c.idleAfter = options.read(idleAfter)
        c.events = options.read(events)
        c.late = LateFixes(options: &options)
        return c
    }

    /// An object of speed limits in km/h by id (device or fence), each above zero.
    static func limits(_ name: String, _ summary: String) -> Option<[String: Double]> {
        Option(name, default: [:], typeName: "object", summary,
            jsonText: { limits in JSONValue.object(JSONObject(limits.sorted { $0.key < $1.key }.map { ($0.key, .number($0.value)) })).jsonText },
            read: { key, reader in
                guard let value = reader.value(key) else { return nil }
                guard case .object(let members) = value else {
                    reader.report(key, "expected an object of id to km/h, got \(value.kindName)")
                    return nil
                }
                var limits: [String: Double] = [:]
                for m in members {
                    guard case .number(let kmh) = m.value, kmh > 0, kmh <= 10_000 else {
                        reader.report("\(key).\(m.key)", "expected a speed in km/h above 0, got \(m.value.jsonText)")
                        continue
                    }
                    limits[m.key] = kmh
                }
                return limits
            })
    }

    public static func makeTransform(_ configuration: MotionConfiguration, context: ComponentContext) throws -> any PositionTransform {
        MotionTransform(configuration: configuration, context: context)
    }
}
