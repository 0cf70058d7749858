import GatewayCore

/// Turns gpsd's TPV/SKY stream into one ``Position`` per device and epoch.
///
/// gpsd reports a TPV after most sentences of a cycle, each carrying its whole current state,
/// so the last TPV with a given time is the epoch's final state (as the NMEA assembler's last
/// state wins). An epoch is emitted when a TPV of that device carries another time, when the
/// device has been quiet for the idle delay (``flushIdle(now:idle:into:)``), or at a disconnect
/// (``flushAll(into:)``). A SKY report belongs to the device's next TPV (gpsd sends a cycle's
/// SKY before the TPV that ends the cycle), so its figures go to that TPV's epoch.
package struct GpsdEpochMerger {
    package typealias Instant = MonotonicInstant

    private struct DeviceState {
        var open: GpsdTPV?
        var openSince: Instant?
        /// SKY figures of the open epoch.
        var openSky: GpsdSky?
        /// SKY figures waiting for the device's next TPV.
        var pendingSky: GpsdSky?
        /// Times of the last epochs emitted (oldest first, at most ``recentLimit``), so a repeated
        /// epoch does not produce a second position with the same id.
        var recent: [Int64] = []
    }

    private static let recentLimit = 64

    /// Written into every position's `source` and its id.
    let source: String
    /// Device id for reports that name none (gpsd always names one; kept for old daemons).
    let defaultDevice: String?
    private var devices: [String: DeviceState] = [:]
    /// Order devices first appeared, so flushes are deterministic.
    private var order: [String] = []

    /// TPVs without a time: not an epoch (gpsd sends them before the receiver knows the date).
    private(set) var untimed = 0
    /// TPVs of an epoch that was already emitted (a late report, gpsd repeating itself after a
    /// reconnect, a log replayed twice): dropped so ids stay unique.
    private(set) var late = 0

    package init(source: String, defaultDevice: String?) {
        self.source = source
        self.defaultDevice = defaultDevice
    }

    /// True while some device has an epoch waiting to be emitted.
    var hasOpenEpochs: Bool { devices.values.contains { $0.open != nil } }

    package mutating func add(_ tpv: GpsdTPV, now: Instant, into out: inout [Position]) {
        let key = tpv.device ?? defaultDevice ?? ""
        var state = devices[key] ?? { order.append(key); return DeviceState() }()
        defer { devices[key] = state }
        let sky = state.pendingSky
        state.pendingSky = nil
        guard let time = tpv.time else { untimed += 1; return }
        if let open = state.open, open.time != time {
            emit(&state, into: &out)
        }
        if state.open == nil {
            if state.recent.contains(time.milliseconds) { late += 1; return }
            state.openSky = nil
        }
        if let sky { state.openSky = Self.merge(sky, into: state.openSky) }
        state.open = tpv
        state.openSince = now
    }

    package mutating func add(_ sky: GpsdSky) {
        let key = sky.device ?? defaultDevice ?? ""
        var state = devices[key] ?? { order.append(key); return DeviceState() }()
        state.pendingSky = Self.merge(sky, into: state.pendingSky)
        devices[key] = state
    }

    /// Several SKYs for one epoch: the newest figures win, older ones fill gaps.
    private static func merge(_ sky: GpsdSky, into old: GpsdSky?) -> GpsdSky {
        guard var merged = old else { return sky }
        merged.satellitesUsed = sky.satellitesUsed ?? merged.satellitesUsed
        merged.hdop = sky.hdop ?? merged.hdop
        merged.vdop = sky.vdop ?? merged.vdop
        merged.pdop = sky.pdop ?? merged.pdop
        return merged
    }

    /// Emits epochs whose device sent no TPV for `idle`, so the last epoch is not held forever.
    package mutating func flushIdle(now: Instant, idle: Duration, into out: inout [Position]) {
        for key in order {
            guard var state = devices[key], state.open != nil, let since = state.openSince, now - since >= idle else { continue }
            emit(&state, into: &out)
            devices[key] = state
        }
    }

    /// Emits every open epoch (end of a connection).
    package mutating func flushAll(into out: inout [Position]) {
        for key in order {
            guard var state = devices[key], state.open != nil else { continue }
            emit(&state, into: &out)
            devices[key] = state
        }
    }

    private func position(_ t: GpsdTPV, sky: GpsdSky?) -> Position {
        let device = t.device ?? defaultDevice
        let ms = t.time?.milliseconds ?? 0
        return Position(
            time: t.time, latitude: t.latitude, longitude: t.longitude, altitude: t.altitude,
            speed: t.speed, course: t.track, mode: t.mode, quality: t.status,
            satellites: sky?.satellitesUsed, hdop: sky?.hdop, vdop: sky?.vdop, pdop: sky?.pdop,
            horizontalError: t.horizontalError, verticalError: t.verticalError,
            source: source, device: device,
            id: device.map { "\(source)-\($0)-\(ms)" } ?? "\(source)-\(ms)", detail: t.detail)
    }

    private func emit(_ state: inout DeviceState, into out: inout [Position]) {
        guard let open = state.open else { return }
        out.append(position(open, sky: state.openSky))
        if let ms = open.time?.milliseconds {
            if state.recent.count >= Self.recentLimit { state.recent.removeFirst() }
            state.recent.append(ms)
        }
        state.open = nil
        state.openSince = nil
        state.openSky = nil
    }
}
