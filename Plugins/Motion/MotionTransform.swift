import GatewayCore

/// The running `motion` transform: passes every position on and, per device, turns the fixes
/// into trips and stops (``TripMachine``), ignition changes, overspeed episodes and idling,
/// emitted as event positions right after the position that decided them.
///
/// One transform rather than one per kind: idling needs the stops and the ignition, overspeed and
/// idling end at a trip's gaps, and ignition can decide trips, so the kinds share one device
/// state, one late-fix judgement and one table lookup per position, and a restart restores them
/// together. Each event is dated and placed at the fix where it happened (a trip's end is the
/// first fix of the stop after it, known `min_stop_duration` later) and its id is that fix's id
/// plus `-<type>`, so a replay repeats the same events with the same ids.
public struct MotionTransform: StatefulTransform {
    /// Everything kept for one device.
    struct DeviceMotion: Sendable, Hashable {
        /// The newest time taken: what a late fix is older than.
        var newest: Timestamp?
        var trips = TripMachine()
        var ignition = IgnitionState()
        var idling: Idling?
        var overspeed: OverspeedEpisode?
    }

    /// What became of one position.
    enum Handling {
        /// Passed on as it came, nothing to add.
        case pass
        /// Older than its device's newest: marked or dropped, changes nothing.
        case late
        /// Passed on, followed by the events in ``MotionTransform/events``.
        case events
    }

    let configuration: MotionConfiguration
    private let context: ComponentContext
    private var devices = DeviceTable<DeviceMotion>()
    /// Scratch reused across positions: one fix's trip outcomes and the events it made.
    private var outcomes: [TripMachine.Outcome] = []
    private var events: [Position] = []
    /// The last `fences` attribute seen and the fence limit it gave.
    private var fenceLimitCache: (fences: String, limit: SpeedLimit?)?
    /// The local plane of the last band of latitude a fix was in.
    private var plane = PlaneScale(band: 0)

    public init(configuration: MotionConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    // MARK: - Positions

    public mutating func process(_ position: Position, into output: inout [Position]) {
        let key = position.deviceKey
        var device = devices.removeValue(forKey: key) ?? DeviceMotion()
        let handling = withUnsafePointer(to: position) { handle($0, key: key, &device) }
        if device.newest != nil { devices[key] = device }
        deliver(position, handling, into: &output)
    }

    /// Works through the batch in place: positions stay where they are unless one is late or
    /// made events, and a device's state is taken out of the table once per run of its positions.
    public mutating func process(batch: inout [Position]) {
        var output: [Position]?
        var key: String?
        var device = DeviceMotion()
        var touched = false
        // Read where they lie: a position passed by value is copied (a retain and a release of
        // each of its strings).
        batch.withUnsafeBufferPointer { positions in
            guard let base = positions.baseAddress else { return }
            for i in positions.indices {
                if positions[i].device != key && (positions[i].device != nil || positions[i].source != key) {
                    if let key, touched { devices[key] = device }
                    let k = positions[i].deviceKey
                    key = k
                    device = devices.removeValue(forKey: k) ?? DeviceMotion()
                    touched = false
                }
                let handling = handle(base + i, key: key!, &device)
                touched = touched || device.newest != nil
                if output == nil {
                    guard case .pass = handling else {
                        output = Array(positions[..<i])
                        output?.reserveCapacity(positions.count + events.count)
                        deliver(positions[i], handling, into: &output!)
                        continue
                    }
                } else {
                    deliver(positions[i], handling, into: &output!)
                }
            }
        }
        if let key, touched { devices[key] = device }
        if let output { batch = output }
    }

    private func deliver(_ position: Position, _ handling: Handling, into output: inout [Position]) {
        switch handling {
        case .pass:
            output.append(position)
        case .late:
            configuration.late.handle(position, stats: context.stats, into: &output)
        case .events:
            output.append(position)
            output.append(contentsOf: events)
        }
    }

    /// Feeds one position to its device's machines; the events it made are left in ``events``.
    /// The position is read where it lies (passed by value, it would be copied: a retain and a
    /// release of each of its strings, for every position).
    private mutating func handle(_ position: UnsafePointer<Position>, key: String, _ d: inout DeviceMotion) -> Handling {
        let p = PositionRef(position)
        // Events (a geofence's, a receiver's health) repeat a fix or carry none; positions
        // without a time or a place say nothing about motion.
        guard p.event == nil, let time = p.time, let latitude = p.latitude, let longitude = p.longitude,
              latitude.isFinite, longitude.isFinite, abs(latitude) <= 90 else { return .pass }
        // A fix its source marked late (stored while out of coverage) changes nothing either.
        let attributes = p.attributes
        let marked = !attributes.isEmpty && attributes[LateFixes.attribute] == "true"
        let verdict: LateFixes.Verdict = marked ? .late : configuration.late.judge(time, newest: d.newest)
        switch verdict {
        case .late:
            return .late
        case .restart:
            // Time started again (a replay looping, a clock reset): the device starts afresh.
            context.stats.count("time_reset")
            d = DeviceMotion()
        case .onTime:
            break
        }
        d.newest = time
        let fix = MotionFix(id: p.identifier, time: time, latitude: latitude, longitude: longitude, speed: p.speed)
        let ignition = IgnitionState.reading(p)
        events.removeAll(keepingCapacity: true)

        let last = d.trips.last
        // Taken out while reporting, which appends to `events` (the buffer goes back after).
        var decided: [TripMachine.Outcome] = []
        swap(&decided, &outcomes)
        defer {
            decided.removeAll(keepingCapacity: true)
            swap(&decided, &outcomes)
        }
        let band = PlaneScale.band(of: latitude)
        if band != plane.band { plane = PlaneScale(band: band) }
        let gapOutcomes = d.trips.feed(fix, ignition: ignition, scale: plane, rules: configuration, into: &decided)
        if let n = gapOutcomes, let last {
            context.stats.count("gaps")
            for o in decided[..<n] { report(o, &d, like: p) }
            // Nothing is known across a gap: what was going on ended at the last fix before it.
            if let e = d.overspeed {
                d.overspeed = nil
                report(e, like: p)
            }
            if let idle = d.idling {
                d.idling = nil
                report(idle, end: last, like: p)
            }
            d.ignition.onSince = nil
            for o in decided[n...] { report(o, &d, like: p) }
        } else {
            for o in decided { report(o, &d, like: p) }
        }

        if let kind = d.ignition.feed(ignition, at: fix) {
            emit(kind, at: fix, like: p)
            if kind == .ignitionOff, let idle = d.idling {
                d.idling = nil
                report(idle, end: fix, like: p)
            }
        }
        if d.idling == nil, d.ignition.on == true, let since = d.ignition.onSince, let stop = d.trips.reportedStop {
            d.idling = Idling(start: Idling.later(stop.start, since))
        }
        if configuration.tracksOverspeed, let ended = OverspeedEpisode.feed(&d.overspeed, fix, limit: speedLimit(p, key: key), rules: configuration) {
            report(ended, like: p)
        }
        return events.isEmpty ? .pass : .events
    }

    // MARK: - Limits

    /// The limit a fix is held to: the lowest of its fences' (from the `fences` attribute), else
    /// its device's, else `speed_limit_kmh`.
    private mutating func speedLimit(_ p: PositionRef, key: String) -> SpeedLimit? {
        if !configuration.fenceSpeedLimits.isEmpty, !p.pointer.pointee.attributes.isEmpty, let fences = p.pointer.pointee.attributes["fences"] {
            if let cached = fenceLimitCache, cached.fences == fences {
                if let limit = cached.limit { return limit }
            } else {
                var lowest: SpeedLimit?
                for id in fences.split(separator: ",") {
                    if let v = configuration.fenceSpeedLimits[String(id)], v < lowest?.speed ?? .infinity { lowest = SpeedLimit(speed: v, fence: String(id)) }
                }
                fenceLimitCache = (fences, lowest)
                if let lowest { return lowest }
            }
        }
        if let v = configuration.deviceSpeedLimits[key] { return SpeedLimit(speed: v) }
        return configuration.speedLimit.map { SpeedLimit(speed: $0) }
    }

    // MARK: - Events

    private mutating func report(_ outcome: TripMachine.Outcome, _ d: inout DeviceMotion, like p: PositionRef) {
        switch outcome {
        case .stopStarted(let stop):
            emit(.stopStart, at: stop.start, like: p)
        case .stopEnded(let stop, let end):
            emit(.stopEnd, at: end, like: p, [
                ("stop.start_time", stop.start.time.iso8601),
                ("stop.start_id", stop.start.id.description),
                ("stop.duration_s", Self.seconds(end.milliseconds(since: stop.start.time))),
                ("stop.lat", Self.number(stop.centre.latitude, 7)),
                ("stop.lon", Self.number(stop.centre.longitude, 7)),
            ])
            if let idle = d.idling {
                d.idling = nil
                report(idle, end: end, like: p)
            }
        case .tripStarted(let start):
            emit(.tripStart, at: start, like: p)
        case .tripEnded(let leg, let end):
            let ms = end.milliseconds(since: leg.start.time)
            var attributes = [
                ("trip.start_time", leg.start.time.iso8601),
                ("trip.start_id", leg.start.id.description),
                ("trip.start_lat", Self.number(leg.start.latitude, 7)),
                ("trip.start_lon", Self.number(leg.start.longitude, 7)),
                ("trip.distance_m", Self.number(leg.distance, 1)),
                ("trip.duration_s", Self.seconds(ms)),
                ("trip.fixes", String(leg.fixes)),
            ]
            if ms > 0 { attributes.append(("trip.avg_speed_kmh", Self.number(leg.distance / (Double(ms) / 1000) * 3.6, 1))) }
            if let v = leg.maxSpeed { attributes.append(("trip.max_speed_kmh", Self.number(v * 3.6, 1))) }
            emit(.tripEnd, at: end, like: p, attributes)
        }
    }

    private mutating func report(_ e: OverspeedEpisode, like p: PositionRef) {
        guard e.milliseconds >= configuration.ms.overspeedMin else {
            context.stats.count("overspeed.short")
            return
        }
        var attributes = [
            ("overspeed.end_time", e.lastAbove.iso8601),
            ("overspeed.duration_s", Self.seconds(e.milliseconds)),
            ("overspeed.max_speed_kmh", Self.number(e.maxSpeed * 3.6, 1)),
            ("overspeed.limit_kmh", Self.number(e.limit * 3.6, 1)),
        ]
        if let fence = e.fence { attributes.append(("overspeed.fence", fence)) }
        emit(.overspeed, at: e.first, like: p, attributes)
    }

    private mutating func report(_ idle: Idling, end: MotionFix, like p: PositionRef) {
        let ms = end.milliseconds(since: idle.start.time)
        guard ms >= configuration.ms.idle else { return }
        emit(.idle, at: idle.start, like: p, [("idle.end_time", end.time.iso8601), ("idle.duration_s", Self.seconds(ms))])
    }

    /// Counts the event and, when its kind is wanted, appends it: a position at the fix where it
    /// happened (time, place, speed, id + `-<type>`) with the device, source, datum and fix mode
    /// of the position that decided it, and the details as attributes.
    private mutating func emit(_ kind: PositionEvent.Kind, at fix: MotionFix, like p: PositionRef, _ attributes: [(String, String)] = []) {
        context.stats.count("events.\(kind.rawValue)")
        guard configuration.events.contains(kind) else { return }
        var e = Position(time: fix.time, latitude: fix.latitude, longitude: fix.longitude, speed: fix.speed, mode: p.mode,
                         datum: p.datum, source: p.source, device: p.device,
                         attributes: Dictionary(attributes, uniquingKeysWith: { $1 }), event: PositionEvent(kind: kind))
        e.id = "\(fix.id)-\(kind.rawValue)"
        events.append(e)
        context.logger.debug("device \(p.deviceKey): \(kind.rawValue) at \(fix.time.iso8601)")
    }

    /// A number rounded to `decimals`, without trailing zeros, as JSON writes it.
    static func number(_ v: Double, _ decimals: Int) -> String {
        var out: [UInt8] = []
        JSONWriter.appendNumber(v, decimals: decimals, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Milliseconds as seconds (`"600"`, `"12.5"`).
    static func seconds(_ milliseconds: Int64) -> String {
        number(Double(milliseconds) / 1000, 3)
    }

    // MARK: - State (the machines of each device, kept across restarts)

    public var stateFormat: String { MotionSnapshot.format }
    public mutating func recordStateChanges() { devices.recordChanges() }
    public mutating func takeChangedDevices() -> [String] { devices.takeChanged() }

    public func snapshot(device: String) -> JSONValue? {
        devices[device].map(MotionSnapshot.write)
    }

    public mutating func restore(device: String, from snapshot: JSONValue) throws(StateSnapshotError) {
        devices[device] = try MotionSnapshot.read(snapshot)
    }
}

/// A position read where it lies, for the length of one ``MotionTransform`` call: its fields
/// without copying the whole of it.
struct PositionRef {
    let pointer: UnsafePointer<Position>

    init(_ pointer: UnsafePointer<Position>) { self.pointer = pointer }

    var event: PositionEvent? { pointer.pointee.event }
    var time: Timestamp? { pointer.pointee.time }
    var latitude: Double? { pointer.pointee.latitude }
    var longitude: Double? { pointer.pointee.longitude }
    var speed: Double? { pointer.pointee.speed }
    var identifier: PositionID { pointer.pointee.identifier }
    var attributes: [String: String] { pointer.pointee.attributes }
    var mode: FixMode { pointer.pointee.mode }
    var datum: Datum { pointer.pointee.datum }
    var source: String { pointer.pointee.source }
    var device: String? { pointer.pointee.device }
    var deviceKey: String { pointer.pointee.deviceKey }
}
