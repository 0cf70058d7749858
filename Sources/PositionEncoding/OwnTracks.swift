import GatewayCore

/// OwnTracks' JSON (owntracks.org/booklet/tech/json): integers where the apps write integers.
///
/// `location`: `lat`, `lon`, `tst` (epoch seconds), `acc` (horizontal error, m), `alt` (m),
/// `vel` (km/h), `cog` (degrees), `tid`, `_id` (the position id). A geofence `enter`/`exit` is a
/// `transition` with `event` `enter`/`leave`, `desc` (fence name, else id), `rid` (fence id), and
/// `wtst` = `tst` (locgate's fences come from configuration, so no creation time is known).
/// `dwell` has no OwnTracks counterpart and goes out as a `location`.
public enum OwnTracks {
    /// Appends the OwnTracks message for `p`.
    public static func append(_ p: Position, to out: inout [UInt8]) {
        var transition: (event: String, fence: FenceEvent)?
        if let e = p.event {
            switch e.kind {
            case .enter: transition = ("enter", e)
            case .exit: transition = ("leave", e)
            default: break  // dwell and health events have no OwnTracks transition
            }
        }
        out.append(contentsOf: transition == nil ? #"{"_type":"location""#.utf8 : #"{"_type":"transition""#.utf8)
        func key(_ k: String) {
            out.append(UInt8(ascii: ","))
            JSONWriter.appendString(k, to: &out)
            out.append(UInt8(ascii: ":"))
        }
        func integer(_ k: String, _ v: Double?) {
            guard let v, v.isFinite, abs(v) < 1e15 else { return }
            key(k)
            JSONWriter.appendInt(Int64(v.rounded()), to: &out)
        }
        if let lat = p.latitude, let lon = p.longitude {
            key("lat"); JSONWriter.appendNumber(lat, decimals: 7, to: &out)
            key("lon"); JSONWriter.appendNumber(lon, decimals: 7, to: &out)
        }
        // tst is required by OwnTracks; a fix without a date has no honest value for it.
        let seconds = p.time.map { t in t.milliseconds >= 0 ? t.milliseconds / 1000 : (t.milliseconds - 999) / 1000 }
        if let seconds { key("tst"); JSONWriter.appendInt(seconds, to: &out) }
        integer("acc", p.horizontalError)
        integer("alt", p.altitude)
        integer("vel", p.speed.map { $0 * 3.6 })
        integer("cog", p.course)
        key("tid"); JSONWriter.appendString(trackerID(p), to: &out)
        if let transition {
            if let seconds { key("wtst"); JSONWriter.appendInt(seconds, to: &out) }
            key("event"); JSONWriter.appendString(transition.event, to: &out)
            let fence = transition.fence.fenceId ?? ""
            key("desc"); JSONWriter.appendString(transition.fence.fenceName ?? fence, to: &out)
            key("rid"); JSONWriter.appendString(fence, to: &out)
        }
        key("_id"); JSONWriter.appendString(p.id, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The `tid` attribute when set (the `set` transform), else the device id's last two
    /// characters, as the OwnTracks apps derive it from the device name.
    public static func trackerID(_ p: Position) -> String {
        if let tid = p.attributes["tid"], !tid.isEmpty { return tid }
        let device = p.deviceKey.filter { $0.isLetter || $0.isNumber }
        return device.isEmpty ? "lg" : String(device.suffix(2))
    }

    // MARK: - Decoding

    /// Why a message is not a position.
    public enum Skip: Error, Sendable, Equatable {
        /// Valid OwnTracks of another `_type` (`transition`, `waypoint`, `card`, `lwt`, `encrypted`…).
        case otherType(String)
        /// A `location` that breaks the format (missing or out-of-range `lat`/`lon`/`tst`, wrong types).
        case invalid(String)
    }

    /// Reads a `_type: location` object: `lat`, `lon`, `tst` (epoch seconds) → time, `acc` →
    /// horizontal error (m), `vac` → vertical error (m), `alt` (m), `vel` (km/h) → speed (m/s),
    /// `cog` → course; `batt` and `tid` become attributes. `device` and `id` are the caller's.
    public static func decode(_ value: JSONValue, source: String, device: String?) throws(Skip) -> Position {
        guard case .object(let o) = value else { throw .invalid("expected an object") }
        guard case .string(let type)? = o["_type"] else { throw .invalid("no _type") }
        guard type == "location" else { throw .otherType(type) }
        func number(_ k: String) throws(Skip) -> Double? {
            switch o[k] {
            case nil, .null?: return nil
            case .number(let n)?: return n
            // Some clients write numbers as strings ("acc": "12"); accept what reads as a number.
            case .string(let s)?:
                guard let n = Double(s), n.isFinite else { throw .invalid("\(k): not a number: \"\(s.prefix(40))\"") }
                return n
            case let v?: throw .invalid("\(k): expected a number, got \(v.kindName)")
            }
        }
        guard let lat = try number("lat"), let lon = try number("lon") else { throw .invalid("lat and lon are required") }
        guard (-90...90).contains(lat), (-180...180).contains(lon) else { throw .invalid("lat/lon out of range: \(lat), \(lon)") }
        guard let tst = try number("tst") else { throw .invalid("tst is required") }
        guard let time = Timestamp(epochSeconds: tst) else { throw .invalid("tst: not a time in epoch seconds: \(tst)") }
        var p = Position()
        p.time = time
        p.latitude = lat
        p.longitude = lon
        p.altitude = try number("alt")
        p.mode = p.altitude == nil ? .twoD : .threeD
        p.horizontalError = try number("acc").flatMap { $0 >= 0 ? $0 : nil }
        p.verticalError = try number("vac").flatMap { $0 >= 0 ? $0 : nil }
        // vel is km/h; negative means unknown in some clients.
        p.speed = try number("vel").flatMap { $0 >= 0 ? $0 / 3.6 : nil }
        p.course = try number("cog").flatMap { (0...360).contains($0) ? $0 : nil }
        if let batt = try number("batt") { p.attributes["batt"] = batt == batt.rounded() && abs(batt) < 1e9 ? String(Int(batt)) : String(batt) }
        if case .string(let tid)? = o["tid"], !tid.isEmpty { p.attributes["tid"] = tid }
        p.source = source
        p.device = device
        return p
    }
}
