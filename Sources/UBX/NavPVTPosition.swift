import GatewayCore

/// How a NAV-PVT becomes a ``Position``: the one place that decides what locgate reports for
/// each fix type and flag (Plugins/SerialInput/README.md, "UBX", says the same for users).
///
/// - Mode and status follow gpsd's NAV-PVT driver: fixType 0 → no fix; 1 (dead reckoning only)
///   → 2D, `estimated`; 2 → 2D; 3 → 3D; 4 (GNSS + dead reckoning) → 3D, `gnss_dead_reckoning`;
///   5 (time only) → 3D, `manual` (a surveyed-in timing receiver's fixed antenna position).
///   With diffSoln set (fixType 1–4): `dgps`, or `rtk_float` / `rtk_fixed` by carrSoln.
/// - **gnssFixOK = 0** (a solution outside the receiver's DOP and accuracy masks): no fix —
///   mode 1, status unknown, no coordinates — as the receiver's own NMEA (GGA quality 0, RMC
///   `V`) and NAV-STATUS say for that epoch. gpsd reports these as fixes; a fix the receiver
///   itself calls invalid must not move a geofence or a distance filter.
/// - **invalidLlh = 1**: latitude, longitude and heights are not valid (u-blox sends zeros):
///   no coordinates, mode 1. gpsd reports them at 0°, 0°.
/// - A latitude beyond ±90° or a longitude beyond ±180° (no receiver sends one; a frame damaged
///   in a way its 16-bit checksum misses can): no coordinates, mode 1, like invalidLlh.
/// - Time: the UTC date and time plus `nano` (which may be negative), rounded to the
///   millisecond, only when validDate and validTime are both set and the year is 1980–2099;
///   otherwise no time.
/// - Fields: `hAcc` → horizontalError (eph), `vAcc` → verticalError (epv), `gSpeed` → speed,
///   `headMot` → course (track), `headVeh` → heading when headVehValid, `pDOP`, `numSV`;
///   the ``FixDetail`` (gpsd's TPV names): `height` → ellipsoidHeight (altHAE, m, with a 3D
///   fix), `sAcc` → speedError (eps, m/s), `headAcc` → courseError (epd, degrees), and while
///   corrections are in use correctionAge (dgpsAge, s, the upper bound of lastCorrectionAge's range).
public enum NavPVTPosition {
    /// Upper bounds of the lastCorrectionAge ranges (code 1: 0–1 s … 12: ≥ 120 s), seconds.
    static let correctionAgeSeconds: [Int] = [0, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 120]

    /// The seconds a lastCorrectionAge code stands for; nil for 0 (not available) and unknown codes.
    public static func correctionAge(code: UInt8) -> Int? {
        code >= 1 && Int(code) < correctionAgeSeconds.count ? correctionAgeSeconds[Int(code)] : nil
    }

    /// Mode and quality of a NAV-PVT as documented above (before gnssFixOK and invalidLlh).
    public static func modeAndQuality(_ pvt: NavPVT) -> (FixMode, FixQuality) {
        var mode: FixMode
        var quality: FixQuality
        switch pvt.fixType {
        case 1: (mode, quality) = (.twoD, .estimated)
        case 2: (mode, quality) = (.twoD, .gps)
        case 3: (mode, quality) = (.threeD, .gps)
        case 4: (mode, quality) = (.threeD, .gnssDeadReckoning)
        case 5: return (.threeD, .manual)
        default: return (.noFix, .unknown)
        }
        if pvt.diffSoln {
            switch pvt.carrSoln {
            case 2: quality = .rtkFixed
            case 1: quality = .rtkFloat
            default: quality = .dgps
            }
        }
        return (mode, quality)
    }

    /// Years a NAV-PVT time is taken from: GPS time starts in 1980 and u-blox documents the
    /// year field up to 2099. Beyond about 2262 the time in nanoseconds overflows an Int64 (the
    /// UBX fuzz target's first find trapped here on year 31073).
    static let years: ClosedRange<UInt16> = 1980...2099

    /// The UTC time in milliseconds since 1970, or nil unless date and time are valid and in range.
    public static func milliseconds(_ pvt: NavPVT) -> Int64? {
        guard pvt.validDate && pvt.validTime, years.contains(pvt.year), pvt.month >= 1, pvt.month <= 12, pvt.day >= 1, pvt.day <= 31,
              pvt.hour < 24, pvt.minute < 60, pvt.second <= 60 else { return nil }
        let days = Int64(Timestamp.daysFromCivil(year: Int(pvt.year), month: Int(pvt.month), day: Int(pvt.day)))
        let seconds = ((days * 24 + Int64(pvt.hour)) * 60 + Int64(pvt.minute)) * 60 + Int64(pvt.second)
        // nano is −1e9…1e9: the rounding of a negative fraction goes to the millisecond below.
        let nanos = seconds * 1_000_000_000 + Int64(pvt.nano)
        let (q, r) = (nanos + 500_000).quotientAndRemainder(dividingBy: 1_000_000)
        return r < 0 ? q - 1 : q
    }

    /// Fills `p` (a blank with the source's origin) from `pvt`; the caller gives it its id.
    public static func fill(_ p: inout Position, from pvt: NavPVT) {
        let (mode, quality) = modeAndQuality(pvt)
        let onEarth = (-900_000_000...900_000_000).contains(pvt.lat) && (-1_800_000_000...1_800_000_000).contains(pvt.lon)
        let valid = mode != .noFix && (pvt.gnssFixOK || pvt.fixType == 5) && !pvt.invalidLlh && onEarth
        p.mode = valid ? mode : .noFix
        p.quality = valid ? quality : .unknown
        p.time = milliseconds(pvt).map(Timestamp.init(milliseconds:))
        if valid {
            p.latitude = Double(pvt.lat) * 1e-7
            p.longitude = Double(pvt.lon) * 1e-7
            if mode == .threeD { p.altitude = Double(pvt.hMSL) / 1000 }
        }
        p.speed = Double(pvt.gSpeed) / 1000
        p.course = Double(pvt.headMot) * 1e-5
        if pvt.headVehValid { p.heading = Double(pvt.headVeh) * 1e-5 }
        p.satellites = Int(pvt.numSV)
        p.pdop = Double(pvt.pDOP) / 100
        p.horizontalError = Double(pvt.hAcc) / 1000
        p.verticalError = Double(pvt.vAcc) / 1000
        p.detail = FixDetail(ellipsoidHeight: valid && mode == .threeD ? Double(pvt.height) / 1000 : nil,
                             speedError: Double(pvt.sAcc) / 1000, courseError: Double(pvt.headAcc) / 100_000,
                             correctionAge: pvt.diffSoln ? correctionAge(code: pvt.lastCorrectionAge).map(Double.init) : nil)
    }
}
