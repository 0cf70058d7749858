/// The `duty_cycle` option of a source that can put its receiver to sleep between windows.
///
/// Windows are wall-clock aligned: one starts whenever `(epoch milliseconds - offset)` is a
/// multiple of `every`, and lasts `on`. Many trackers with the same schedule wake together;
/// different offsets spread them.
public struct DutyCycleConfiguration: Sendable, Hashable {
    public static let offsetOption = Option("duty_cycle.offset", default: Duration.zero,
        "Shifts the windows (spread many trackers, or align them); shorter than every.")
    public static let emitOption = Option("duty_cycle.emit", default: Emit.best,
        "best: one position per window, the first fix meeting max_hdop and max_horizontal_error, else the window's last fix; all: every position of the window.")
    public static let sleepOption = Option("duty_cycle.sleep", default: [String](),
        "With method commands: lines written at the end of each window (CR LF added). Required with commands, refused otherwise.")
    public static let wakeOption = Option("duty_cycle.wake", default: [String](),
        "With method commands: lines written at the start of each window (CR LF added). Required with commands, refused otherwise.")

    /// How the receiver is put to sleep and woken (serial source only).
    public enum Method: String, Sendable, Hashable, CaseIterable {
        /// u-blox: UBX-RXM-PMREQ backup mode until woken, woken by a byte on its RX line.
        case ublox
        /// MediaTek / Quectel: `$PMTK161,0` standby, woken by a byte on its RX line.
        case mtk
        /// The `sleep` and `wake` lines of the configuration.
        case commands
        /// Close the port between windows (a receiver powered through the port's lines, or gpsd-style release).
        case close
    }

    /// What a window emits.
    public enum Emit: String, Sendable, Hashable, CaseIterable {
        /// The first fix meeting `max_hdop` / `max_horizontal_error`, else the window's last fix.
        case best
        /// Every position of the window.
        case all
    }

    public var on: Duration
    public var every: Duration
    public var offset = DutyCycleConfiguration.offsetOption.defaultValue
    /// nil for sources that have no method (gpsd).
    public var method: Method?
    /// Lines written to sleep / wake the receiver with method `commands` (CR LF added).
    public var sleep = DutyCycleConfiguration.sleepOption.defaultValue
    public var wake = DutyCycleConfiguration.wakeOption.defaultValue
    public var emit = DutyCycleConfiguration.emitOption.defaultValue
    public var maxHDOP: Double?
    public var maxHorizontalError: Double?

    public init(on: Duration, every: Duration, offset: Duration = DutyCycleConfiguration.offsetOption.defaultValue, method: Method? = nil) {
        self.on = on
        self.every = every
        self.offset = offset
        self.method = method
    }

    /// The option specs of `duty_cycle`; `methods` for sources that choose how to sleep (serial).
    public static func optionSpecs(methods: Bool, summary: String) -> [OptionSpec] {
        var specs = [
            OptionSpec("duty_cycle", "object", default: "none (always on)", summary),
            OptionSpec("duty_cycle.on", "duration", required: true, "Length of each window in which the receiver is awake; shorter than every."),
            OptionSpec("duty_cycle.every", "duration", required: true, "Window period; windows start when wall-clock time (UTC, since the epoch) minus offset is a multiple of it."),
            offsetOption.spec,
        ]
        if methods {
            specs += [
                OptionSpec("duty_cycle.method", "ublox | mtk | commands | close", required: true, "How to sleep and wake: ublox (UBX-RXM-PMREQ backup, wake by a byte), mtk ($PMTK161,0 standby, wake by a byte), commands (sleep/wake lines), close (close the port between windows)."),
                sleepOption.spec,
                wakeOption.spec,
            ]
        }
        specs += [
            emitOption.spec,
            OptionSpec("duty_cycle.max_hdop", "number", default: "none", "With emit best: a fix with a higher HDOP is not good enough to end the search."),
            OptionSpec("duty_cycle.max_horizontal_error", "number", default: "none", "With emit best: a fix with a larger 1-sigma horizontal error (metres) is not good enough to end the search."),
        ]
        return specs
    }

    /// Reads `duty_cycle`; nil when absent or when it has problems (reported with their paths).
    public static func read(_ options: inout OptionReader, methods: Bool) -> DutyCycleConfiguration? {
        guard var d = options.object("duty_cycle") else { return nil }
        var ok = true
        let on = d.duration("on")
        let every = d.duration("every")
        if on == nil && !d.has("on") { d.report("on", "required option is missing (the length of each window, e.g. \"10s\")"); ok = false }
        if every == nil && !d.has("every") { d.report("every", "required option is missing (the window period, e.g. \"2m\")"); ok = false }
        let offset = d.read(offsetOption)
        var c = DutyCycleConfiguration(on: on ?? .seconds(1), every: every ?? .seconds(2), offset: offset)
        if let on, let every {
            if on <= .zero { d.report("on", "must be longer than 0s"); ok = false }
            if on >= every {
                d.report("on", "must be shorter than every (\(DurationText.format(every))): a window of \(DurationText.format(on)) every \(DurationText.format(every)) never sleeps; leave duty_cycle out to keep the receiver on")
                ok = false
            }
            if offset >= every { d.report("offset", "must be shorter than every (\(DurationText.format(every)))"); ok = false }
        } else if on == nil || every == nil {
            ok = false
        }
        if methods {
            let names = Method.allCases.map(\.rawValue)
            if let m = d.string("method") {
                if let method = Method(rawValue: m) { c.method = method } else {
                    d.report("method", "unknown method \"\(m)\"; expected one of \(names.map { "\"\($0)\"" }.joined(separator: ", "))"
                        + Suggestion.hint(for: m, among: names))
                    ok = false
                }
            } else if !d.has("method") {
                d.report("method", "required option is missing: one of \(names.map { "\"\($0)\"" }.joined(separator: ", "))")
                ok = false
            }
            c.sleep = d.read(sleepOption)
            c.wake = d.read(wakeOption)
            if c.method == .commands {
                if c.sleep.isEmpty { d.report("sleep", "method \"commands\" needs the lines that put the receiver to sleep"); ok = false }
                if c.wake.isEmpty { d.report("wake", "method \"commands\" needs the lines that wake the receiver (an empty line sends CR LF)"); ok = false }
            } else if let m = c.method {
                for key in ["sleep", "wake"] where d.has(key) && !(key == "sleep" ? c.sleep : c.wake).isEmpty {
                    d.report(key, "only used with method \"commands\"; method \"\(m.rawValue)\" has its own")
                    ok = false
                }
            }
        }
        c.emit = d.read(emitOption)
        c.maxHDOP = d.optionalDouble("max_hdop", in: 0...100)
        c.maxHorizontalError = d.optionalDouble("max_horizontal_error", in: 0...1e7)
        if c.emit == .all {
            for (key, v) in [("max_hdop", c.maxHDOP), ("max_horizontal_error", c.maxHorizontalError)] where v != nil {
                d.report(key, "only used with emit \"best\"")
                ok = false
            }
        }
        d.finish()
        return ok ? c : nil
    }

    /// The schedule of windows.
    public var schedule: DutySchedule { DutySchedule(on: on, every: every, offset: offset) }

    /// Whether a fix is good enough to be a window's `best` at once.
    public func isGoodEnough(_ p: Position) -> Bool {
        guard p.mode >= .twoD, p.hasCoordinates else { return false }
        if let limit = maxHDOP, let v = p.hdop, v > limit { return false }
        if let limit = maxHorizontalError, let v = p.horizontalError, v > limit { return false }
        return true
    }
}

/// Wall-clock aligned windows: `[k·every + offset, k·every + offset + on)` in epoch milliseconds.
public struct DutySchedule: Sendable, Hashable {
    public var on: Duration
    public var every: Duration
    public var offset: Duration

    public init(on: Duration, every: Duration, offset: Duration = .zero) {
        self.on = on
        self.every = every
        self.offset = offset
    }

    /// Where `now` falls: inside a window or not, that window's (or the last one's) start and end, and the next start.
    public func phase(at now: Timestamp) -> (inside: Bool, start: Timestamp, end: Timestamp, nextStart: Timestamp) {
        let period = max(1, every.milliseconds)
        let t = now.milliseconds - offset.milliseconds
        // Floor division, so times before the epoch (tests) work too.
        let k = t >= 0 ? t / period : (t - period + 1) / period
        let start = k * period + offset.milliseconds
        let end = start + on.milliseconds
        return (now.milliseconds < end, Timestamp(milliseconds: start), Timestamp(milliseconds: end), Timestamp(milliseconds: start + period))
    }

    /// Receiver on-time per hour, in seconds, for this schedule (the effect the docs report).
    public var onSecondsPerHour: Double {
        Double(on.milliseconds) / Double(max(1, every.milliseconds)) * 3600
    }
}

/// One duty-cycle window's choice of what to emit (`best` or `all`).
public struct DutyWindowSelector: Sendable {
    public let configuration: DutyCycleConfiguration
    /// The window's last fix, emitted at its end when no fix was good enough.
    private var fallback: Position?
    /// True once a good-enough fix went out: the rest of the window is dropped.
    private var settled = false

    public init(configuration: DutyCycleConfiguration) { self.configuration = configuration }

    /// A new window begins.
    public mutating func reset() {
        fallback = nil
        settled = false
    }

    /// Positions decoded inside the window; appends what goes out now and returns how many were held back or dropped.
    @discardableResult
    public mutating func offer(_ positions: [Position], into out: inout [Position]) -> Int {
        if configuration.emit == .all {
            out += positions
            return 0
        }
        var dropped = 0
        for p in positions {
            if p.event != nil { out.append(p); continue }
            if settled || p.mode < .twoD || !p.hasCoordinates { dropped += 1; continue }
            if configuration.isGoodEnough(p) {
                settled = true
                if fallback != nil { dropped += 1 }
                fallback = nil
                out.append(p)
            } else {
                if fallback != nil { dropped += 1 }
                fallback = p
            }
        }
        return dropped
    }

    /// The window ended: the last fix when none was good enough.
    public mutating func close(into out: inout [Position]) {
        if let f = fallback, !settled { out.append(f) }
        reset()
    }
}

extension DutyWindowSelector {
    /// What a health-watching, duty-cycled source emits of freshly decoded `positions` (which it
    /// empties): the positions with the health events they cause, then, when duty cycling,
    /// nothing but events outside a window (`awake` false) and the window's choice inside one.
    /// Counts `duty.outside_window` and `duty.not_selected` in `stats`.
    public static func emission(of positions: inout [Position], health: inout ReceiverHealth?, selector: inout DutyWindowSelector?,
                                awake: Bool, now: Timestamp, stats: ComponentStats) -> [Position] {
        var out: [Position] = []
        if health != nil {
            health?.record(positions, at: now, into: &out)
        } else {
            out = positions
        }
        positions.removeAll(keepingCapacity: true)
        guard selector != nil else { return out }
        if !awake {
            let outside = out.filter { $0.event == nil }.count
            if outside > 0 { stats.count("duty.outside_window", by: outside) }
            out.removeAll { $0.event == nil }
            return out
        }
        var kept: [Position] = []
        let held = selector?.offer(out, into: &kept) ?? 0
        if held > 0 { stats.count("duty.not_selected", by: held) }
        return kept
    }
}
