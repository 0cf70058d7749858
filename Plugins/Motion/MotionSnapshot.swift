import GatewayCore

/// A device's motion state as the state store keeps it (`motion/1`), and back.
///
/// ```
/// { "newest": ms, "last": fix, "moving": true,
///   "stop": stop, "rest": leg, "fast_since": ms,                         (stopped; moving: the stop left)
///   "trip": leg, "trip_confirmed": true,
///   "candidate": { "leg": leg, "first": fix, "centre": centre, "fast_since": ms },   (moving)
///   "ignition": bool, "ignition_since": fix, "idle_start": fix,
///   "overspeed": { "first": fix, "last_above": ms, "max": m/s, "limit": m/s, "fence": id } }
/// fix = { "id", "t": ms, "lat", "lon", "v": m/s }   leg = { "start": fix, "m", "n", "vmax": m/s }
/// stop = { "start": fix, "confirmed": bool, "centre": centre }   centre = { "lat", "lon", "n" }
/// ```
///
/// Members that are absent are nil (or false); a few hundred bytes per device.
enum MotionSnapshot {
    static let format = "motion/1"

    // MARK: - Writing

    static func write(_ d: MotionTransform.DeviceMotion) -> JSONValue {
        var w = SnapshotWriter()
        let t = d.trips
        w.set("newest", d.newest)
        w.set("last", t.last.map(fix))
        w.set("moving", t.moving ? true : nil)
        w.set("stop", t.stop.map(stop))
        w.set("rest", t.rest.map(leg))
        w.set("fast_since", t.fastSince)
        w.set("trip", t.trip.map(leg))
        w.set("trip_confirmed", t.tripConfirmed ? true : nil)
        if let c = t.candidate, let a = t.arrival {
            var cw = SnapshotWriter()
            cw.set("leg", leg(a.leg))
            cw.set("first", fix(a.first))
            cw.set("centre", centre(c.centre))
            cw.set("fast_since", c.fastSince)
            w.set("candidate", cw.value)
        }
        w.set("ignition", d.ignition.on)
        w.set("ignition_since", d.ignition.onSince.map(fix))
        w.set("idle_start", d.idling.map { fix($0.start) })
        if let e = d.overspeed {
            var ow = SnapshotWriter()
            ow.set("first", fix(e.first))
            ow.set("last_above", e.lastAbove)
            ow.set("max", e.maxSpeed)
            ow.set("limit", e.limit)
            ow.set("fence", e.fence.map(JSONValue.string))
            w.set("overspeed", ow.value)
        }
        return w.value
    }

    private static func fix(_ f: MotionFix) -> JSONValue {
        var w = SnapshotWriter()
        w.set("id", JSONValue.string(f.id.description))
        w.set("t", f.time)
        w.set("lat", f.latitude)
        w.set("lon", f.longitude)
        w.set("v", f.speed)
        return w.value
    }

    private static func leg(_ l: Leg) -> JSONValue {
        var w = SnapshotWriter()
        w.set("start", fix(l.start))
        w.set("m", l.distance)
        w.set("n", l.fixes)
        w.set("vmax", l.maxSpeed)
        return w.value
    }

    private static func stop(_ s: TripMachine.Stop) -> JSONValue {
        var w = SnapshotWriter()
        w.set("start", fix(s.start))
        w.set("confirmed", s.confirmed)
        w.set("centre", centre(s.centre))
        return w.value
    }

    private static func centre(_ c: Centre) -> JSONValue {
        var w = SnapshotWriter()
        w.set("lat", c.latitude)
        w.set("lon", c.longitude)
        w.set("n", c.count)
        return w.value
    }

    // MARK: - Reading

    static func read(_ snapshot: JSONValue) throws(StateSnapshotError) -> MotionTransform.DeviceMotion {
        let r = try SnapshotReader(snapshot)
        var d = MotionTransform.DeviceMotion()
        d.newest = try r.time("newest")
        d.trips.last = try optionalFix(snapshot, "last")
        d.trips.moving = try r.bool("moving") ?? false
        d.trips.stop = try optional(snapshot, "stop").map { (v) throws(StateSnapshotError) in try stop(v) }
        d.trips.rest = try optional(snapshot, "rest").map { (v) throws(StateSnapshotError) in try leg(v) }
        d.trips.fastSince = try r.time("fast_since")
        d.trips.trip = try optional(snapshot, "trip").map { (v) throws(StateSnapshotError) in try leg(v) }
        d.trips.tripConfirmed = try r.bool("trip_confirmed") ?? false
        if let c = try optional(snapshot, "candidate") {
            let arrival = TripMachine.Arrival(leg: try leg(member(c, "leg")), first: try fix(member(c, "first")))
            d.trips.arrival = arrival
            d.trips.candidate = TripMachine.Candidate(centre: try centre(member(c, "centre")), since: arrival.first.time,
                                                      fastSince: try SnapshotReader(c).time("fast_since"), distance: arrival.leg.distance)
        }
        if d.trips.last != nil {
            // What each phase needs, or the machine would stop short.
            guard d.trips.moving ? d.trips.trip != nil : (d.trips.stop != nil && d.trips.rest != nil) else {
                throw StateSnapshotError(d.trips.moving ? "moving without a trip" : "stopped without a stop and a rest")
            }
        }
        d.ignition.on = try r.bool("ignition")
        d.ignition.onSince = try optionalFix(snapshot, "ignition_since")
        d.idling = try optionalFix(snapshot, "idle_start").map(Idling.init)
        if let o = try optional(snapshot, "overspeed") {
            let or = try SnapshotReader(o)
            guard let lastAbove = try or.time("last_above"), let max = try or.double("max"), let limit = try or.double("limit") else {
                throw StateSnapshotError("overspeed: needs last_above, max and limit")
            }
            d.overspeed = OverspeedEpisode(first: try fix(member(o, "first")), lastAbove: lastAbove, maxSpeed: max, limit: limit,
                                           fence: o["fence"]?.stringValue)
        }
        return d
    }

    private static func optional(_ value: JSONValue, _ key: String) throws(StateSnapshotError) -> JSONValue? {
        guard let v = value[key], v != .null else { return nil }
        guard case .object = v else { throw StateSnapshotError("\(key): expected an object, got \(v.kindName)") }
        return v
    }

    private static func member(_ value: JSONValue, _ key: String) throws(StateSnapshotError) -> JSONValue {
        guard let v = value[key], v != .null else { throw StateSnapshotError("\(key): missing") }
        return v
    }

    private static func optionalFix(_ value: JSONValue, _ key: String) throws(StateSnapshotError) -> MotionFix? {
        guard let v = value[key], v != .null else { return nil }
        return try fix(v)
    }

    private static func fix(_ value: JSONValue) throws(StateSnapshotError) -> MotionFix {
        let r = try SnapshotReader(value)
        guard let id = value["id"]?.stringValue, let time = try r.time("t"), let lat = try r.double("lat"), let lon = try r.double("lon") else {
            throw StateSnapshotError("a fix needs id, t, lat and lon, got \(value.jsonText)")
        }
        return MotionFix(id: PositionID(id), time: time, latitude: lat, longitude: lon, speed: try r.double("v"))
    }

    private static func leg(_ value: JSONValue) throws(StateSnapshotError) -> Leg {
        let r = try SnapshotReader(value)
        guard let distance = try r.double("m"), let fixes = try r.int("n"), fixes >= 1 else {
            throw StateSnapshotError("a leg needs m and n, got \(value.jsonText)")
        }
        return Leg(start: try fix(member(value, "start")), distance: distance, fixes: fixes, maxSpeed: try r.double("vmax"))
    }

    private static func stop(_ value: JSONValue) throws(StateSnapshotError) -> TripMachine.Stop {
        TripMachine.Stop(start: try fix(member(value, "start")), confirmed: try SnapshotReader(value).bool("confirmed") ?? false,
                         centre: try centre(member(value, "centre")))
    }

    private static func centre(_ value: JSONValue) throws(StateSnapshotError) -> Centre {
        let r = try SnapshotReader(value)
        guard let lat = try r.double("lat"), let lon = try r.double("lon"), let n = try r.int("n") else {
            throw StateSnapshotError("a centre needs lat, lon and n, got \(value.jsonText)")
        }
        return Centre(latitude: lat, longitude: lon, count: n)
    }
}
