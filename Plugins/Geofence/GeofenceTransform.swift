import EnvironmentChecks
import Foundation
import GatewayCore
import Geodesy

/// Thrown by ``GeofenceTransform/init(configuration:context:)`` when the fence file cannot be loaded.
public struct GeofenceSetupError: Error, CustomStringConvertible {
    /// What went wrong, starting with the option it concerns.
    public var description: String
}

/// The running `geofence` transform: gates or annotates each position by the fences that
/// contain it, and tracks per-device, per-fence state for enter/exit/dwell events.
///
/// Gating and annotation use the exact geometry of each position (boundary counts as inside);
/// events go through ``FenceStateMachine`` hysteresis. Events are emitted after the position
/// that caused them and are never gated.
public struct GeofenceTransform: DeviceTableTransform {
    /// What one device is known to be inside, and where it last was.
    public struct DeviceState: Sendable {
        /// Machines that are not idle, by fence id (ids survive a reload; offsets do not).
        var fences: [String: FenceStateMachine] = [:]
        /// Last accepted position in the fence datum, for segment (jump) checks.
        var last: GeoPoint?
        /// The newest time of an accepted position: what a late one is older than.
        var newest: Timestamp?
    }

    private let configuration: GeofenceConfiguration
    private let context: ComponentContext
    private var fenceSet: FenceSet
    /// Per-device state (``DeviceTableTransform``: changes, snapshots and restoring come from the table).
    public var devices = DeviceTable<DeviceState>()
    /// Modification time and size of the fence file when it was last read.
    private var fileSignature: FileSignature?
    /// Scratch buffers reused across positions so the hot path does not allocate.
    private var containing: [Int] = []
    private var relevant: [Int] = []
    /// The fences (offsets) of the last annotation and its attributes, built once per change
    /// of fences rather than per position.
    private var annotation: (fences: [Int], attributes: [String: String]) = ([], [:])

    /// The reload check interval when the fences come from a file; nil for inline fences.
    public var tickInterval: Duration? {
        if case .file = configuration.source { return configuration.reload }
        return nil
    }

    /// Loads the fences; throws when the fence file cannot be read or parsed.
    public init(configuration: GeofenceConfiguration, context: ComponentContext) throws {
        self.configuration = configuration
        self.context = context
        switch configuration.source {
        case .inline(let fences):
            fenceSet = FenceSet(Self.filter(fences, configuration: configuration, logger: context.logger))
        case .file(let path):
            fileSignature = FileSignature(path: path)
            do {
                let fences = try FenceLoader(idProperty: configuration.idProperty, nameProperty: configuration.nameProperty).load(file: path)
                fenceSet = FenceSet(Self.filter(fences, configuration: configuration, logger: context.logger))
            } catch {
                throw GeofenceSetupError(description: "fences: \(error)")
            }
        }
        context.stats.set("fences", fenceSet.fences.count)
        context.logger.info("\(fenceSet.fences.count) fence(s) loaded")
    }

    /// The loaded fences (after `only`).
    public var fences: [Fence] { fenceSet.fences }

    /// Fence ids the device is currently (confirmed) inside, sorted.
    public func fencesInside(device: String) -> [String] {
        (devices[device]?.fences.filter { $0.value.isInside }.map(\.key) ?? []).sorted()
    }

    static func filter(_ fences: [Fence], configuration: GeofenceConfiguration, logger: Logger) -> [Fence] {
        guard let only = configuration.only else { return fences }
        let kept = fences.filter { only.contains($0.id) }
        let missing = only.subtracting(kept.map(\.id))
        if !missing.isEmpty { logger.warning("only: no fence with id \(missing.sorted().joined(separator: ", "))") }
        return kept
    }

    // MARK: - Positions

    public mutating func process(_ position: Position, into output: inout [Position]) {
        var out = position
        let (keep, point) = gate(&out)
        if let point, !configuration.events.isEmpty {
            track(out, keep: keep, at: point, into: &output)
        } else if keep {
            output.append(out)
        }
    }

    public mutating func process(batch: inout [Position]) {
        // Events add positions: only gating and annotation work in place.
        guard configuration.events.isEmpty else { return processEach(batch: &batch) }
        batch.updateAndFilter { gate(&$0).keep }
    }

    /// Gates and annotates `p` where it lies: whether it passes, and its point in the fence
    /// datum when it is a fix that may move its device across a fence.
    private mutating func gate(_ p: inout Position) -> (keep: Bool, point: GeoPoint?) {
        if let kind = p.event?.kind, !kind.isFence {
            // A health event carries the last known coordinates, not a new fix: it must reach the
            // sinks whatever the fences say, and must not move a device across one.
            return (true, nil)
        }
        guard let point = fencePoint(latitude: p.latitude, longitude: p.longitude, datum: p.datum) else {
            switch configuration.action {
            case .keepInside:
                context.stats.count("dropped.no_coordinates")
                return (false, nil)
            case .keepOutside, .annotate: return (true, nil)
            }
        }
        // Filled through a local so the closure can read `fenceSet` in place: a copy of the set
        // per position costs a retain and a release of each of its parts.
        var found: [Int] = []
        swap(&found, &containing)
        found.removeAll(keepingCapacity: true)
        fenceSet.fences.withUnsafeBufferPointer { fences in
            // Read in place through the buffer: `fences[i]` through the array copied the fence
            // (a retain and a release of its id, name and shape) per candidate.
            fenceSet.index.forEachCandidate(containing: point) { i in
                if fences[i].shape.locate(point) != .outside { found.append(i) }
            }
        }
        found.sort()
        swap(&found, &containing)

        switch configuration.action {
        case .keepInside:
            if containing.isEmpty { context.stats.count("dropped.outside"); return (false, point) }
        case .keepOutside:
            if !containing.isEmpty { context.stats.count("dropped.inside"); return (false, point) }
        case .annotate:
            if !containing.isEmpty {
                if containing != annotation.fences {
                    let set = fenceSet
                    annotation = (containing, [
                        "fences": containing.map { set.fences[$0].id }.joined(separator: ","),
                        "fence_names": containing.map { set.fences[$0].name ?? set.fences[$0].id }.joined(separator: ","),
                    ])
                }
                if p.attributes.isEmpty {
                    // Shares the storage with the positions before it in the same fences.
                    p.attributes = annotation.attributes
                } else {
                    for (k, v) in annotation.attributes { p.attributes[k] = v }
                }
            }
        }
        return (true, point)
    }

    /// A position's coordinates in the fence datum, or nil without usable coordinates. Given the
    /// three fields, not the position: passing a position copies all of it.
    func fencePoint(latitude: Double?, longitude: Double?, datum positionDatum: Datum) -> GeoPoint? {
        guard let lat = latitude, let lon = longitude, lat.isFinite, lon.isFinite, abs(lat) <= 90 else { return nil }
        let datum: ChinaDatums.Datum
        switch positionDatum {
        case .wgs84: datum = .wgs84
        case .gcj02: datum = .gcj02
        case .bd09: datum = .bd09
        case let d where !d.isGeographic:
            // The coordinates transform keeps WGS84 latitude/longitude beside x/y on projected output.
            datum = .wgs84
        default:
            context.stats.count("skipped.datum")
            return nil
        }
        let p = GeoPoint(latitude: lat, longitude: normalizeLongitude(lon))
        return datum == configuration.fenceDatum ? p : ChinaDatums.convert(p, from: datum, to: configuration.fenceDatum)
    }

    /// Appends the position when `keep` (marked when late), then, unless it is late or too
    /// inaccurate, runs every relevant fence's state machine for its device and appends the events.
    private mutating func track(_ position: Position, keep: Bool, at point: GeoPoint, into output: inout [Position]) {
        let key = position.deviceKey
        // Taken out of the dictionary so mutating its fence map does not copy it.
        var device = devices.removeValue(forKey: key) ?? DeviceState()
        if configuration.late.judge(position, newest: device.newest) == .late {
            // Older than a fix the machines already took: gated and annotated like any position,
            // but feeding it would roll the device back (an old fix inside a fence it has left
            // is a false enter and exit).
            devices[key] = device
            if keep { configuration.late.handle(position, stats: context.stats, into: &output) } else { context.stats.count("late") }
            return
        }
        if keep { output.append(position) }
        if let limit = configuration.maxHorizontalError, let eph = position.horizontalError, eph > limit {
            context.stats.count("skipped.accuracy")
            // Put back unchanged; a device seen before always has a last point, a new one keeps
            // no state for a fix it did not take.
            if device.last != nil { devices[key] = device }
            return
        }
        let set = fenceSet
        let border = configuration.borderMeters

        // Fences whose state can change: those containing the point, those the segment from
        // the last point may cross, and those already holding state for this device. A fence
        // merely near the point (within the border) cannot change an idle machine.
        relevant.removeAll(keepingCapacity: true)
        relevant.append(contentsOf: containing)
        if let last = device.last {
            let segmentBox = GeoBox(minLatitude: last.latitude, maxLatitude: last.latitude, minLongitude: last.longitude, maxLongitude: last.longitude)
                .union(GeoBox(minLatitude: point.latitude, maxLatitude: point.latitude, minLongitude: point.longitude, maxLongitude: point.longitude))
            set.index.forEachCandidate(intersecting: segmentBox) { relevant.append($0) }
        }
        for id in device.fences.keys {
            if let i = set.offsetById[id] { relevant.append(i) }
        }
        relevant.sort()

        var previous = -1
        var next = 0   // walks `containing` (sorted) alongside `relevant`
        for i in relevant where i != previous {
            previous = i
            while next < containing.count && containing[next] < i { next += 1 }
            let isIn = next < containing.count && containing[next] == i
            let fence = set.fences[i]
            let existing = device.fences[fence.id]
            var machine = existing ?? FenceStateMachine()
            // Distances are computed only where the border band changes the outcome: a
            // confirmed-inside machine treats inside and border alike, an outside one treats
            // outside and border alike unless the track jumped across the fence.
            var crossed = false
            let evidence: FenceEvidence
            switch (isIn, machine.isInside) {
            case (true, true):
                evidence = .inside
            case (true, false):
                evidence = border > 0 && fence.shape.distanceToBoundary(from: point) < border ? .border : .inside
            case (false, true):
                evidence = border > 0 && fence.shape.distanceToBoundary(from: point) < border ? .border : .outside
            case (false, false):
                evidence = .outside
                if let last = device.last, fence.shape.locate(last) == .outside, fence.shape.segmentIntersects(from: last, to: point) {
                    crossed = border == 0 || (fence.shape.distanceToBoundary(from: point) >= border && fence.shape.distanceToBoundary(from: last) >= border)
                }
                if !crossed && existing == nil { continue }
            }
            let action = machine.event(evidence, at: position.time, crossed: crossed, rule: configuration.rule)
            for kind in action.kinds {
                context.stats.count("events.\(kind.rawValue)")
                if kind != .dwell {
                    context.logger.info("device \(key) \(kind == .enter ? "entered" : "left") fence \(fence.id)\(fence.name.map { " (\($0))" } ?? "")\(action == [.enter, .exit] ? " (crossed between two positions)" : "")")
                } else {
                    context.logger.info("device \(key) dwelling in fence \(fence.id)\(fence.name.map { " (\($0))" } ?? "")")
                }
                guard configuration.events.contains(kind) else { continue }
                var event = position
                event.id = "\(position.id)-\(kind.rawValue)-\(fence.id)"
                event.event = FenceEvent(kind: kind, fenceId: fence.id, fenceName: fence.name)
                output.append(event)
            }
            if machine.isIdle {
                if existing != nil { device.fences[fence.id] = nil }
            } else if machine != existing {
                device.fences[fence.id] = machine
            }
        }
        device.last = point
        device.newest = position.time ?? device.newest
        devices[key] = device
    }

    // MARK: - State (kept across restarts when events are on: each fence's machine, the last point, the newest time)

    public var keepsState: Bool { !configuration.events.isEmpty }
    public var stateFormat: String { "geofence/1" }

    public func write(_ d: DeviceState, to w: inout SnapshotWriter) {
        w.set("lat", d.last?.latitude)
        w.set("lon", d.last?.longitude)
        w.set("newest", d.newest)
        var fences: [(String, JSONValue)] = []
        for (id, machine) in d.fences.sorted(by: { $0.key < $1.key }) {
            var m = SnapshotWriter()
            let saved = machine.saved
            m.set("inside", machine.isInside)
            m.set("since", machine.insideSince)
            m.set("streak", saved.streak == 0 ? nil : saved.streak)
            m.set("streak_start", saved.streakStart)
            m.set("dwelled", saved.dwelled ? true : nil)
            fences.append((id, m.value))
        }
        w.set("fences", JSONValue.object(JSONObject(fences)))
    }

    /// Machines of fences that no longer exist are not restored (as a fence file reload drops them).
    public func value(from r: SnapshotReader) throws(StateSnapshotError) -> DeviceState {
        var state = DeviceState()
        let lat = try r.double("lat"), lon = try r.double("lon")
        if let lat, let lon { state.last = GeoPoint(latitude: lat, longitude: lon) }
        state.newest = try r.time("newest")
        let current = fenceSet.offsetById
        for member in try r.members("fences") ?? JSONObject() where current[member.key] != nil {
            let m = try SnapshotReader(member.value)
            let machine = FenceStateMachine(isInside: try m.bool("inside") ?? false, insideSince: try m.time("since"),
                                            streak: try m.int("streak") ?? 0, streakStart: try m.time("streak_start"),
                                            dwelled: try m.bool("dwelled") ?? false)
            if !machine.isIdle { state.fences[member.key] = machine }
        }
        return state
    }

    // MARK: - Reload

    public mutating func tick(now: Timestamp, into output: inout [Position]) {
        reloadIfChanged()
    }

    /// Re-reads the fence file when its modification time or size changed; keeps the old
    /// fences when the new file does not load. Device state is kept by fence id; state for
    /// fences that disappeared is dropped.
    public mutating func reloadIfChanged() {
        guard case .file(let path) = configuration.source else { return }
        let signature = FileSignature(path: path)
        guard signature != fileSignature else { return }
        fileSignature = signature
        do {
            let fences = try FenceLoader(idProperty: configuration.idProperty, nameProperty: configuration.nameProperty).load(file: path)
            fenceSet = FenceSet(Self.filter(fences, configuration: configuration, logger: context.logger))
            annotation = ([], [:])
        } catch {
            context.stats.count("reload.failed")
            context.logger.error("fence reload failed, keeping \(fenceSet.fences.count) fence(s): \(error)")
            return
        }
        let current = fenceSet.offsetById
        var dropped = 0
        devices.updateAll { device in
            let before = device.fences.count
            device.fences = device.fences.filter { current[$0.key] != nil }
            dropped += before - device.fences.count
        }
        if dropped > 0 { context.logger.info("dropped the state of \(dropped) device/fence pair(s) whose fence is gone") }
        context.stats.count("reloads")
        context.stats.set("fences", fenceSet.fences.count)
        context.logger.info("fences reloaded: \(fenceSet.fences.count) fence(s)")
    }
}
