import GatewayCore

/// Turns gpsd's TPV/SKY stream into one ``Position`` per device and epoch.
///
/// gpsd reports a TPV after most sentences of a cycle, each carrying its whole current state,
/// so the last TPV with a given time is the epoch's final state (as the NMEA assembler's last
/// state wins). An epoch is emitted when a TPV of that device carries another time, when the
/// device has been quiet for the idle delay (``flushIdle(now:idle:into:)``), or at a disconnect
/// (``flushAll(into:)``). SKY figures wait for the device's next emitted position.
struct GpsdEpochMerger {
    typealias Instant = ContinuousClock.Instant

    private struct DeviceState {
        var open: GpsdTPV?
        var openSince: Instant?
        var sky: GpsdSky?
        var lastEmitted: Timestamp?
    }

    /// Written into every position's `source` and its id.
    let source: String
    /// Device id for reports that name none (gpsd always names one; kept for old daemons).
    let defaultDevice: String?
    private var devices: [String: DeviceState] = [:]
    /// Order devices first appeared, so flushes are deterministic.
    private var order: [String] = []

    /// TPVs without a time: not an epoch (gpsd sends them before the receiver knows the date).
    private(set) var untimed = 0
    /// TPVs whose epoch was already emitted (a late report, or gpsd repeating itself after a reconnect).
    private(set) var late = 0

    init(source: String, defaultDevice: String?) {
        self.source = source
        self.defaultDevice = defaultDevice
    }

    /// True while some device has an epoch waiting to be emitted.
    var hasOpenEpochs: Bool { devices.values.contains { $0.open != nil } }

    mutating func add(_ tpv: GpsdTPV, now: Instant, into out: inout [Position]) {
        guard let time = tpv.time else { untimed += 1; return }
        let key = tpv.device ?? defaultDevice ?? ""
        var state = devices[key] ?? { order.append(key); return DeviceState() }()
        if let open = state.open, open.time != time {
            emit(&state, key: key, into: &out)
        }
        if state.open == nil, let last = state.lastEmitted, last == time {
            late += 1
            devices[key] = state
            return
        }
        state.open = tpv
        state.openSince = now
        devices[key] = state
    }

    mutating func add(_ sky: GpsdSky) {
        let key = sky.device ?? defaultDevice ?? ""
        var state = devices[key] ?? { order.append(key); return DeviceState() }()
        if var pending = state.sky {
            // Several SKYs before one position: the newest figures win, older ones fill gaps.
            pending.satellitesUsed = sky.satellitesUsed ?? pending.satellitesUsed
            pending.hdop = sky.hdop ?? pending.hdop
            pending.vdop = sky.vdop ?? pending.vdop
            pending.pdop = sky.pdop ?? pending.pdop
            state.sky = pending
        } else {
            state.sky = sky
        }
        devices[key] = state
    }

    /// Emits epochs whose device sent no TPV for `idle`, so the last epoch is not held forever.
    mutating func flushIdle(now: Instant, idle: Duration, into out: inout [Position]) {
        for key in order {
            guard var state = devices[key], state.open != nil, let since = state.openSince, now - since >= idle else { continue }
            emit(&state, key: key, into: &out)
            devices[key] = state
        }
    }

    /// Emits every open epoch (end of a connection).
    mutating func flushAll(into out: inout [Position]) {
        for key in order {
            guard var state = devices[key], state.open != nil else { continue }
            emit(&state, key: key, into: &out)
            devices[key] = state
        }
    }

    private func position(_ t: GpsdTPV, sky: GpsdSky?, key: String) -> Position {
        let device = t.device ?? defaultDevice
        let ms = t.time?.milliseconds ?? 0
        return Position(
            time: t.time, latitude: t.latitude, longitude: t.longitude, altitude: t.altitude,
            speed: t.speed, course: t.track, mode: t.mode, quality: t.status,
            satellites: sky?.satellitesUsed, hdop: sky?.hdop, vdop: sky?.vdop, pdop: sky?.pdop,
            horizontalError: t.horizontalError, verticalError: t.verticalError,
            source: source, device: device,
            id: device.map { "\(source)-\($0)-\(ms)" } ?? "\(source)-\(ms)")
    }

    private func emit(_ state: inout DeviceState, key: String, into out: inout [Position]) {
        guard let open = state.open else { return }
        out.append(position(open, sky: state.sky, key: key))
        state.lastEmitted = open.time
        state.open = nil
        state.openSince = nil
        state.sky = nil
    }
}
