import GatewayCore

/// How one position becomes one MQTT message body.
public enum MQTTPayloadFormat: String, Sendable {
    /// The position object of ``PositionJSON`` (gpsd TPV names, with `id`).
    case json
    /// What the OwnTracks apps publish: `_type` `location`, or `transition` for geofence enter/exit.
    case owntracks

    /// Appends the message body for `p`.
    public func append(_ p: Position, to out: inout [UInt8]) {
        switch self {
        case .json: PositionJSON.append(p, to: &out)
        case .owntracks: OwnTracksPayload.append(p, to: &out)
        }
    }
}

/// OwnTracks' JSON (owntracks.org/booklet/tech/json): integers where the apps write integers.
///
/// `location`: `lat`, `lon`, `tst` (epoch seconds), `acc` (horizontal error, m), `alt` (m),
/// `vel` (km/h), `cog` (degrees), `tid`, `_id` (the position id). A geofence `enter`/`exit` is a
/// `transition` with `event` `enter`/`leave`, `desc` (fence name, else id), `rid` (fence id), and
/// `wtst` = `tst` (locgate's fences come from configuration, so no creation time is known).
/// `dwell` has no OwnTracks counterpart and goes out as a `location`.
enum OwnTracksPayload {
    static func append(_ p: Position, to out: inout [UInt8]) {
        var transition: (event: String, fence: FenceEvent)?
        if let e = p.event {
            switch e.kind {
            case .enter: transition = ("enter", e)
            case .exit: transition = ("leave", e)
            case .dwell: break
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
            key("desc"); JSONWriter.appendString(transition.fence.fenceName ?? transition.fence.fenceId, to: &out)
            key("rid"); JSONWriter.appendString(transition.fence.fenceId, to: &out)
        }
        key("_id"); JSONWriter.appendString(p.id, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The `tid` attribute when set (the `set` transform), else the device id's last two
    /// characters, as the OwnTracks apps derive it from the device name.
    static func trackerID(_ p: Position) -> String {
        if let tid = p.attributes["tid"], !tid.isEmpty { return tid }
        let device = p.deviceKey.filter { $0.isLetter || $0.isNumber }
        return device.isEmpty ? "lg" : String(device.suffix(2))
    }
}
