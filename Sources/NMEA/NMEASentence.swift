/// One parsed sentence: only the fields the epoch assembler uses, as absent-able values.
enum NMEASentence: Sendable {
    case rmc(RMC)
    case gga(GGA)
    case gns(GNS)
    case gll(GLL)
    case gsa(GSA)
    /// GSV carries satellites in view only: validated, then nothing to merge.
    case gsv
    case vtg(VTG)
    case zda(ZDA)
    case gst(GST)
    /// HDT or THS: true heading in degrees; `valid` is false for a THS `V` status.
    case heading(Double?, valid: Bool)

    /// Recommended minimum data.
    struct RMC: Sendable {
        var time: Int?
        /// `A` valid, `V` warning.
        var status: UInt8?
        var latitude: Double?
        var longitude: Double?
        var speedKnots: Double?
        var course: Double?
        var date: (day: Int, month: Int, year: Int)?
        var modeIndicator: UInt8?
    }

    /// Fix data.
    struct GGA: Sendable {
        var time: Int?
        var latitude: Double?
        var longitude: Double?
        var quality: Int?
        var satellites: Int?
        var hdop: Double?
        var altitude: Double?
    }

    /// Multi-constellation fix data.
    struct GNS: Sendable {
        var time: Int?
        var latitude: Double?
        var longitude: Double?
        /// The first mode character (GPS), and whether any system has a fix.
        var modeIndicator: UInt8?
        var anyFix: Bool
        var satellites: Int?
        var hdop: Double?
        var altitude: Double?
    }

    /// Geographic position.
    struct GLL: Sendable {
        var latitude: Double?
        var longitude: Double?
        var time: Int?
        var status: UInt8?
        var modeIndicator: UInt8?
    }

    /// DOP and active satellites.
    struct GSA: Sendable {
        /// 1 no fix, 2 2D, 3 3D.
        var mode: Int?
        var pdop: Double?
        var hdop: Double?
        var vdop: Double?
    }

    /// Course and speed over ground.
    struct VTG: Sendable {
        var courseTrue: Double?
        var speedKnots: Double?
        var speedKmh: Double?
        var modeIndicator: UInt8?
    }

    /// Time and date.
    struct ZDA: Sendable {
        var time: Int?
        var day: Int?
        var month: Int?
        var year: Int?
    }

    /// Pseudorange error statistics.
    struct GST: Sendable {
        var time: Int?
        var latitudeError: Double?
        var longitudeError: Double?
        var altitudeError: Double?
    }

    /// The time of day in milliseconds, for sentences that carry one.
    var timeOfDay: Int? {
        switch self {
        case .rmc(let s): s.time
        case .gga(let s): s.time
        case .gns(let s): s.time
        case .gll(let s): s.time
        case .zda(let s): s.time
        case .gst(let s): s.time
        case .gsa, .gsv, .vtg, .heading: nil
        }
    }
}
