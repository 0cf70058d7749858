/// What a receiver says about its antenna (u-blox `ANTSTATUS`, MediaTek `PGTOP,11`).
public enum AntennaStatus: String, Sendable, Hashable, CaseIterable {
    case ok, open, short
}

/// The `health` option of a live source: which health events it emits, and when.
public struct HealthConfiguration: Sendable, Hashable {
    public static let fixTimeoutOption = Option("health.fix_timeout", default: Duration.seconds(30), minimum: .milliseconds(100),
        "No position with a 2D/3D fix for this long (while the device is watched) emits fix_lost; the next fix emits fix_regained.")
    public static let dataTimeoutOption = Option("health.data_timeout", default: Duration.seconds(10), minimum: .milliseconds(100),
        "No valid data from the device for this long (unplugged, powered off, wrong baud rate) emits no_data; the next valid data emits data_resumed.")

    /// No position with a fix for this long emits `fix_lost`.
    public var fixTimeout = HealthConfiguration.fixTimeoutOption.defaultValue
    /// No valid data for this long emits `no_data`.
    public var dataTimeout = HealthConfiguration.dataTimeoutOption.defaultValue

    public init(fixTimeout: Duration = HealthConfiguration.fixTimeoutOption.defaultValue,
                dataTimeout: Duration = HealthConfiguration.dataTimeoutOption.defaultValue) {
        self.fixTimeout = fixTimeout
        self.dataTimeout = dataTimeout
    }

    /// The option specs of `health`, for a source's `PluginInfo`.
    public static let optionSpecs: [OptionSpec] = [
        OptionSpec("health", "object", default: "none (no health events)", "Turns on health events (fix_lost, fix_regained, no_data, data_resumed, antenna): positions carrying an event, delivered in order with the fixes; see Docs/Power-and-health.md. {} uses the defaults below."),
        fixTimeoutOption.spec,
        dataTimeoutOption.spec,
    ]

    /// Reads the `health` object of a source; nil when absent (health events off).
    public static func read(_ options: inout OptionReader) -> HealthConfiguration? {
        guard var h = options.object("health") else { return nil }
        var c = HealthConfiguration()
        c.fixTimeout = h.read(fixTimeoutOption)
        c.dataTimeout = h.read(dataTimeoutOption)
        h.finish()
        return c
    }
}

/// Per-device receiver health: turns what a source sees (data, fixes, antenna reports) and the
/// passing of time into health events.
///
/// Clock-driven and without I/O: the source feeds it and calls ``check(at:into:)`` whenever it
/// wakes (every read timeout), and emits what it appends, in order with its positions. Each
/// event is logged (warning for `fix_lost`, `no_data`, antenna `open`/`short`; info for the
/// others) and counted as `health.<type>`; the gauges `health.silent_devices` and
/// `health.devices_without_fix` hold the current state.
///
/// An event is a position with ``Position/event`` set, stamped with the time it was detected,
/// carrying the device's last fix coordinates when there was one, and mode "no fix" — except
/// `fix_regained`, which is a copy of the fix that ended the outage.
public struct ReceiverHealth: Sendable {
    struct Device: Sendable {
        /// When the device was last (re)started watching: the timers run from here without data or fix.
        var since: Timestamp
        var lastData: Timestamp?
        var lastFix: Timestamp?
        var lastFixPosition: Position?
        var silent = false
        var fixLost = false
        var antenna: AntennaStatus?
        var jamming: JammingState?
        var spoofing: SpoofingState?
        /// The RTK quality of the last position (`rtkFixed`, `rtkFloat`, or nil for anything else).
        var rtk: FixQuality?
        /// Whether any position was seen, so the first non-RTK one is no `rtk_lost`.
        var sawPosition = false
        /// When duty cycling put the receiver to sleep on purpose; no timers run until it wakes.
        var suspendedAt: Timestamp?
    }

    public let configuration: HealthConfiguration
    private let source: String
    private let logger: Logger
    private let stats: ComponentStats
    private var devices: [String: Device] = [:]
    /// Device ids in the order they were first seen, so checks (and their events) are deterministic.
    private var order: [String] = []

    /// The tracker of the source `context` whose `health` option is `configuration`; nil when it
    /// has none.
    public init?(_ configuration: HealthConfiguration?, context: ComponentContext) {
        guard let configuration else { return nil }
        self.init(configuration: configuration, source: context.id, logger: context.logger, stats: context.stats)
    }

    public init(configuration: HealthConfiguration, source: String, logger: Logger, stats: ComponentStats) {
        self.configuration = configuration
        self.source = source
        self.logger = logger
        self.stats = stats
    }

    /// Starts watching `device` (a port was opened, a receiver is expected): its timers run from `now`.
    public mutating func watch(device: String, at now: Timestamp) {
        guard devices[device] == nil else { return }
        devices[device] = Device(since: now)
        order.append(device)
    }

    /// Valid data arrived from `device`.
    public mutating func dataReceived(device: String, at now: Timestamp, into out: inout [Position]) {
        watch(device: device, at: now)
        guard var d = devices[device] else { return }
        d.lastData = now
        if d.silent && d.suspendedAt == nil {
            d.silent = false
            devices[device] = d
            emit(.dataResumed, device: device, at: now, into: &out)
            publishGauges()
        } else {
            devices[device] = d
        }
    }

    /// Appends `positions` to `out`, each followed by the `fix_regained` and `rtk_*` events it causes.
    public mutating func record(_ positions: [Position], at now: Timestamp, into out: inout [Position]) {
        for p in positions {
            out.append(p)
            if p.event == nil { noteRTK(p, at: now, into: &out) }
            guard p.event == nil, p.mode >= .twoD, p.hasCoordinates else { continue }
            let key = p.deviceKey
            watch(device: key, at: now)
            guard var d = devices[key] else { continue }
            d.lastFix = now
            d.lastFixPosition = p
            let regained = d.fixLost
            d.fixLost = false
            devices[key] = d
            if regained {
                var event = p
                event.id = "\(p.id)-fix_regained"
                event.event = PositionEvent(kind: .fixRegained)
                note(.fixRegained, device: key, detail: "")
                out.append(event)
                publishGauges()
            }
        }
    }

    /// The receiver reported its antenna status; a change (or a first report that is not `ok`) is an event.
    public mutating func antenna(_ status: AntennaStatus, device: String, at now: Timestamp, into out: inout [Position]) {
        watch(device: device, at: now)
        guard var d = devices[device] else { return }
        let previous = d.antenna
        d.antenna = status
        devices[device] = d
        guard previous != status, previous != nil || status != .ok else { return }
        emit(.antenna, device: device, at: now, status: status.rawValue, into: &out)
    }

    /// A status the receiver reported: a change (or a first report that is not `ok` / `none`) is an event.
    public mutating func report(_ report: ReceiverReport, device: String, at now: Timestamp, into out: inout [Position]) {
        switch report {
        case .antenna(let status):
            antenna(status, device: device, at: now, into: &out)
        case .jamming(let state):
            watch(device: device, at: now)
            guard let previous = devices[device].map({ $0.jamming }) else { return }
            devices[device]?.jamming = state
            guard previous != state, previous != nil || state != .ok else { return }
            emit(.jamming, device: device, at: now, status: state.rawValue, into: &out)
        case .spoofing(let state):
            watch(device: device, at: now)
            guard let previous = devices[device].map({ $0.spoofing }) else { return }
            devices[device]?.spoofing = state
            guard previous != state, previous != nil || state != .notIndicated else { return }
            emit(.spoofing, device: device, at: now, status: state.rawValue, into: &out)
        }
    }

    /// `rtk_fixed` / `rtk_float` when a position's quality enters that RTK state, `rtk_lost` when
    /// it leaves RTK for anything else (a first position that is not RTK is no event). The
    /// event is a copy of the position that shows the change (without coordinates: the last fix's).
    private mutating func noteRTK(_ p: Position, at now: Timestamp, into out: inout [Position]) {
        let key = p.deviceKey
        let rtk: FixQuality? = p.quality == .rtkFixed || p.quality == .rtkFloat ? p.quality : nil
        watch(device: key, at: now)
        guard var d = devices[key] else { return }
        let previous = d.rtk
        let seen = d.sawPosition
        d.rtk = rtk
        d.sawPosition = true
        devices[key] = d
        guard seen ? previous != rtk : rtk != nil else { return }
        let kind: PositionEvent.Kind
        switch rtk {
        case .rtkFixed?: kind = .rtkFixed
        case .rtkFloat?: kind = .rtkFloat
        default: kind = .rtkLost
        }
        var event = p
        event.id = "\(p.id)-\(kind.rawValue)"
        event.event = PositionEvent(kind: kind, status: p.quality?.name)
        if !p.hasCoordinates, let last = d.lastFixPosition {
            event.latitude = last.latitude
            event.longitude = last.longitude
            event.altitude = last.altitude
        }
        note(kind, device: key, detail: p.quality?.name ?? "no fix")
        out.append(event)
    }

    /// Emits `no_data` and `fix_lost` for every watched device whose timer ran out.
    public mutating func check(at now: Timestamp, into out: inout [Position]) {
        var changed = false
        for key in order {
            guard var d = devices[key], d.suspendedAt == nil else { continue }
            if !d.silent, now.milliseconds - (d.lastData ?? d.since).milliseconds >= configuration.dataTimeout.milliseconds {
                d.silent = true
                devices[key] = d
                emit(.noData, device: key, at: now, into: &out)
                changed = true
            }
            if !d.fixLost, now.milliseconds - (d.lastFix ?? d.since).milliseconds >= configuration.fixTimeout.milliseconds {
                d.fixLost = true
                devices[key] = d
                emit(.fixLost, device: key, at: now, into: &out)
                changed = true
            }
        }
        if changed { publishGauges() }
    }

    /// Duty cycling put the receiver to sleep: silence and the lack of a fix are expected until ``resume(device:at:)``.
    public mutating func suspend(device: String, at now: Timestamp) {
        watch(device: device, at: now)
        if devices[device]?.suspendedAt == nil { devices[device]?.suspendedAt = now }
    }

    /// The receiver was woken: its timers go on from where the sleep stopped them, so only awake
    /// time counts (a receiver that finds no fix in any window still reports `fix_lost`).
    public mutating func resume(device: String, at now: Timestamp) {
        watch(device: device, at: now)
        guard var d = devices[device], let slept = d.suspendedAt else { return }
        let shift = max(0, now.milliseconds - slept.milliseconds)
        func later(_ t: Timestamp) -> Timestamp { Timestamp(milliseconds: t.milliseconds + shift) }
        d.suspendedAt = nil
        d.since = later(d.since)
        d.lastData = d.lastData.map(later)
        d.lastFix = d.lastFix.map(later)
        devices[device] = d
    }

    /// Sleeps for `delay` in steps of at most `step`, emitting the events that come due meanwhile
    /// (a source waiting to reconnect still reports `no_data`).
    public mutating func sleep(for delay: Duration, clock: any GatewayClock, output: SourceOutput, step: Duration = .milliseconds(200)) async throws {
        var left = delay
        while left > .zero {
            let s = min(left, step)
            try await clock.sleep(for: s)
            left -= s
            var out: [Position] = []
            check(at: clock.now(), into: &out)
            await output.emit(out)
        }
    }

    /// Whether `device` is in a `no_data` (silent) or `fix_lost` state (for tests and the stats).
    public func state(of device: String) -> (silent: Bool, fixLost: Bool)? {
        devices[device].map { ($0.silent, $0.fixLost) }
    }

    // MARK: - Events

    private mutating func emit(_ kind: PositionEvent.Kind, device: String, at now: Timestamp, status: String? = nil, into out: inout [Position]) {
        var p = Position(time: now, mode: .noFix, source: source, device: device,
                         id: "\(source)-\(kind.rawValue)-\(now.milliseconds)-\(device)")
        if let last = devices[device]?.lastFixPosition {
            p.latitude = last.latitude
            p.longitude = last.longitude
            p.altitude = last.altitude
            p.datum = last.datum
            p.x = last.x
            p.y = last.y
        }
        p.event = PositionEvent(kind: kind, status: status)
        out.append(p)
        note(kind, device: device, detail: status ?? "")
    }

    private func note(_ kind: PositionEvent.Kind, device: String, detail: String) {
        stats.count("health.\(kind.rawValue)")
        let c = configuration
        switch kind {
        case .fixLost:
            logger.warning("device \(device): fix lost (no position with a fix for \(DurationText.format(c.fixTimeout)), fix_timeout)")
        case .fixRegained:
            logger.info("device \(device): fix regained")
        case .noData:
            logger.warning("device \(device): no data for \(DurationText.format(c.dataTimeout)) (data_timeout): unplugged, powered off, or at another baud rate?")
        case .dataResumed:
            logger.info("device \(device): data resumed")
        case .antenna:
            let message = "device \(device): antenna \(detail)"
            if detail == AntennaStatus.ok.rawValue { logger.info(message) } else {
                logger.warning(message + (detail == AntennaStatus.open.rawValue ? " (antenna cable cut or unplugged?)" : " (antenna cable or antenna shorted?)"))
            }
        case .jamming:
            if detail == JammingState.ok.rawValue { logger.info("device \(device): jamming \(detail)") } else {
                logger.warning("device \(device): jamming \(detail) (interference on the antenna input)")
            }
        case .spoofing:
            if detail == SpoofingState.notIndicated.rawValue { logger.info("device \(device): spoofing \(detail)") } else {
                logger.warning("device \(device): spoofing \(detail) (the receiver suspects false signals)")
            }
        case .rtkFixed, .rtkFloat:
            logger.info("device \(device): \(kind == .rtkFixed ? "RTK fixed" : "RTK float")")
        case .rtkLost:
            logger.warning("device \(device): RTK lost (now \(detail))")
        case .enter, .exit, .dwell, .command, .tripStart, .tripEnd, .stopStart, .stopEnd, .ignitionOn, .ignitionOff, .overspeed, .idle:
            break
        }
    }

    private func publishGauges() {
        stats.set("health.silent_devices", devices.values.filter(\.silent).count)
        stats.set("health.devices_without_fix", devices.values.filter(\.fixLost).count)
    }
}
