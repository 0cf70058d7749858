/// How a transform that keeps per-device state treats late positions: positions older than the
/// newest one it already took for the same device.
///
/// Devices deliver late: a tracker replays its buffer after a dead spot behind a live fix, a
/// broker redelivers a message after newer ones. State built from the newest fixes (inside a
/// fence, the last passed point, the last good point) must not be rolled back by an old one —
/// an old fix inside a fence the device has left would report a false enter and exit. So a
/// late position never changes state: it is passed on marked (`late` = `true`) or dropped,
/// and counted either way. The geofence, distance filter, throttle, dedupe and jump filter
/// share this type; each keeps the newest time per device in its own state, beside what it
/// keys by `deviceKey`, so judging costs one comparison.
public struct LateFixes: Sendable, Hashable {
    /// What happens to a late position.
    public enum Action: String, Sendable, Hashable, CaseIterable {
        /// Passed on with the attribute `late` = `true`.
        case pass
        /// Dropped (`dropped.late`).
        case drop
    }

    /// How one position's time stands against the newest its device gave the transform.
    public enum Verdict: Sendable, Hashable {
        /// Not older than the newest, without a time, or the device's first: taken as always.
        case onTime
        /// Older than the newest: changes no state.
        case late
        /// Older than the newest by more than ``limit``: not a late fix but time starting again
        /// (a replay looping, a receiver's clock reset, a fix dated in the future before it), taken
        /// as always — which for the filters means starting the device afresh.
        case restart
    }

    /// Pass or drop.
    public var action: Action
    /// How much older than the newest a position may be and still be late; nil for no limit.
    public var limit: Duration?

    /// The attribute a passed late position carries.
    public static let attribute = "late"

    public static let actionOption = Option("late", default: Action.pass,
        "A position older than the newest one this transform took for its device is late: it changes no state (no event, no new reference) and is counted as late; pass: passed on with the attribute late = \"true\"; drop: dropped (dropped.late).")
    /// Zero is no limit: ``limit`` is nil then.
    public static let limitOption = Option("late_limit", default: Duration.seconds(3600),
        "A position more than this older than its device's newest is not late but time starting again (a replay looping, a clock reset) and is taken as before; 0: no limit, every older position is late.")

    /// The options every stateful transform documents, in its `PluginInfo`.
    public static var options: [OptionSpec] { [actionOption.spec, limitOption.spec] }

    public init(action: Action = actionOption.defaultValue, limit: Duration? = limitOption.defaultValue) {
        self.action = action
        self.limit = limit
    }

    /// Reads `late` and `late_limit`.
    public init(options: inout OptionReader) {
        action = options.read(Self.actionOption)
        let limit = options.read(Self.limitOption)
        self.limit = limit > .zero ? limit : nil
    }

    /// Judges a position: late when its source marked it so (a tracker's fixes stored while it
    /// was out of coverage, JT/T 808's 0x0704 type 1, carry `late` = `true` from the start),
    /// else by its time against the newest time the transform took for its device.
    @inline(__always)
    public func judge(_ position: Position, newest: Timestamp?) -> Verdict {
        if !position.attributes.isEmpty, position.attributes[Self.attribute] == "true" { return .late }
        return judge(position.time, newest: newest)
    }

    /// Judges a position's time against the newest time the transform took for its device.
    @inline(__always)
    public func judge(_ time: Timestamp?, newest: Timestamp?) -> Verdict {
        guard let time, let newest, time < newest else { return .onTime }
        if let limit, newest.milliseconds - time.milliseconds > limit.milliseconds { return .restart }
        return .late
    }

    /// Counts a late position (`late`) and passes it marked or drops it (`dropped.late`). A
    /// position carrying an event (a geofence transition, a receiver's health) is never dropped:
    /// filters never swallow events.
    public func handle(_ position: Position, stats: ComponentStats, into output: inout [Position]) {
        stats.count("late")
        if action == .drop && position.event == nil {
            stats.addDropped(1)
            stats.count("dropped.late")
            return
        }
        var marked = position
        Self.mark(&marked)
        output.append(marked)
    }

    /// Sets the `late` attribute.
    public static func mark(_ position: inout Position) {
        position.attributes[attribute] = "true"
    }
}
