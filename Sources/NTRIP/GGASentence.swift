import GatewayCore
import NMEA

/// The `$GPGGA` a client sends its NTRIP caster: the receiver's own last fix, so a virtual
/// reference station is computed where the rover is (or the nearest base is chosen).
public enum GGASentence {
    /// GGA fix quality of a position's status: 1 GPS, 2 DGPS, 4 RTK fixed, 5 RTK float,
    /// 6 dead reckoning, 7 manual; a fix with no better word is 1.
    static func quality(_ q: FixQuality?) -> Int {
        switch q {
        case .dgps: 2
        case .rtkFixed: 4
        case .rtkFloat: 5
        case .estimated, .gnssDeadReckoning: 6
        case .manual: 7
        case .precise: 3
        default: 1
        }
    }

    /// The sentence with its checksum and CRLF, or nil for a position without a fix (no GGA is
    /// sent before there is one: a caster would place the station at 0°, 0°).
    ///
    /// Time from the fix (UTC, or `now` when it has none); latitude and longitude to 1e-7 minutes
    /// (0.2 mm), altitude above mean sea level to 0.1 m.
    public static func sentence(for p: Position, now: Timestamp) -> String? {
        guard p.mode != .noFix, let lat = p.latitude, let lon = p.longitude, lat.isFinite, lon.isFinite,
              abs(lat) <= 90, abs(lon) <= 180 else { return nil }
        let t = p.time ?? now
        let msOfDay = ((t.milliseconds % 86_400_000) + 86_400_000) % 86_400_000
        let hh = msOfDay / 3_600_000, mm = msOfDay / 60_000 % 60, ss = msOfDay / 1000 % 60, cs = msOfDay / 10 % 100
        let time = pad(hh, 2) + pad(mm, 2) + pad(ss, 2) + "." + pad(cs, 2)
        let satellites = p.satellites.map { pad(Int64(min(max($0, 0), 99)), 2) } ?? "08"
        let hdop = p.hdop.map { Decimal2.text($0, places: 1) } ?? "1.0"
        let altitude = p.altitude.map { Decimal2.text($0, places: 1) } ?? "0.0"
        let body = "GPGGA,\(time),\(angle(abs(lat), degreeDigits: 2)),\(lat < 0 ? "S" : "N"),\(angle(abs(lon), degreeDigits: 3)),\(lon < 0 ? "W" : "E"),"
            + "\(quality(p.quality)),\(satellites),\(hdop),\(altitude),M,0.0,M,,"
        return NMEAChecksum.sentence(body: body)
    }

    /// `ddmm.mmmmmmm` (or `dddmm.…`) of a positive angle.
    static func angle(_ degrees: Double, degreeDigits: Int) -> String {
        // In units of 1e-7 minutes, rounded once, so 59.99999999' never prints as 60'.
        let total = Int64((degrees * 60 * 10_000_000).rounded())
        let whole = total / (60 * 10_000_000)
        let minutes = total % (60 * 10_000_000)
        return pad(whole, degreeDigits) + pad(minutes / 10_000_000, 2) + "." + pad(minutes % 10_000_000, 7)
    }

    static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    enum Decimal2 {
        static func text(_ v: Double, places: Int) -> String {
            let scale = places == 1 ? 10.0 : 100.0
            let n = Int64((v * scale).rounded())
            let sign = n < 0 ? "-" : ""
            let m = n.magnitude
            return sign + String(m / UInt64(scale)) + "." + pad(Int64(m % UInt64(scale)), places)
        }
    }
}
