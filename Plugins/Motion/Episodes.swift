import GatewayCore

/// The ignition as the device last reported it (the `ignition` attribute trackers give).
struct IgnitionState: Sendable, Hashable {
    /// Nil until a fix carried the attribute.
    var on: Bool?
    /// The first fix of the current "on" period seen after the last gap: where idling may start.
    var onSince: MotionFix?

    /// Reads the attribute: `true`/`false` as trackers write it, `1`/`0`, `on`/`off`; anything
    /// else is no report.
    static func reading(_ position: PositionRef) -> Bool? {
        guard !position.pointer.pointee.attributes.isEmpty, let text = position.pointer.pointee.attributes["ignition"] else { return nil }
        switch text.lowercased() {
        case "true", "1", "on", "yes": return true
        case "false", "0", "off", "no": return false
        default: return nil
        }
    }

    /// Takes one fix's reading; returns `ignition_on` or `ignition_off` when it changed.
    mutating func feed(_ value: Bool?, at fix: MotionFix) -> PositionEvent.Kind? {
        guard let value else { return nil }
        let previous = on
        on = value
        if value && (previous != true || onSince == nil) { onSince = fix }
        if !value { onSince = nil }
        guard let previous, previous != value else { return nil }
        return value ? .ignitionOn : .ignitionOff
    }
}

/// A run of fixes above the speed limit, with dips at or below it shorter than `overspeed_max_dip`.
struct OverspeedEpisode: Sendable, Hashable {
    var first: MotionFix
    /// The newest fix above the limit.
    var lastAbove: Timestamp
    /// m/s.
    var maxSpeed: Double
    /// The lowest limit a fix above it was held to, m/s, and the fence it came from.
    var limit: Double
    var fence: String?

    /// Feeds one fix with its speed and limit; returns the episode that ended (reported or not:
    /// the caller checks its length) and keeps the one going on in `episode`.
    static func feed(_ episode: inout OverspeedEpisode?, _ fix: MotionFix, limit: SpeedLimit?, rules: MotionConfiguration) -> OverspeedEpisode? {
        guard let speed = fix.speed, let limit else { return nil }
        if speed > limit.speed {
            // Changed where it lies: copied out and back, its first fix's id would be retained
            // and released for every fix above the limit.
            if episode != nil {
                episode!.lastAbove = fix.time
                if speed > episode!.maxSpeed { episode!.maxSpeed = speed }
                if limit.speed < episode!.limit { (episode!.limit, episode!.fence) = (limit.speed, limit.fence) }
            } else {
                episode = OverspeedEpisode(first: fix, lastAbove: fix.time, maxSpeed: speed, limit: limit.speed, fence: limit.fence)
            }
            return nil
        }
        guard let lastAbove = episode?.lastAbove, fix.milliseconds(since: lastAbove) >= rules.ms.overspeedDip else { return nil }
        defer { episode = nil }
        return episode
    }

    /// From the first fix above the limit to the last, in milliseconds.
    var milliseconds: Int64 { lastAbove.milliseconds - first.time.milliseconds }
}

/// The limit one fix is held to, m/s, and the fence it comes from (nil: the device's or the default).
struct SpeedLimit: Sendable, Hashable {
    var speed: Double
    var fence: String?
}

/// Idling: the ignition on while the device is in a reported stop.
struct Idling: Sendable, Hashable {
    /// Where and when it began: the stop's start or the ignition's turning on, whichever was later.
    var start: MotionFix

    /// The later of two fixes (the first one on a tie).
    static func later(_ a: MotionFix, _ b: MotionFix) -> MotionFix {
        b.time > a.time ? b : a
    }
}
