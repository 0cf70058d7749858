import GatewayCore

/// One parsed sentence: only the fields the epoch assembler uses, as absent-able values.
///
/// The optional numbers are ``CompactDouble``s (nil as a NaN pattern, 8 bytes instead of 16):
/// each sentence is copied on its way from the parser to the assembler, and smaller payloads
/// make those copies cheaper (1.6% of a replay's instructions).
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
        @CompactDouble var latitude: Double? = nil
        @CompactDouble var longitude: Double? = nil
        @CompactDouble var speedKnots: Double? = nil
        @CompactDouble var course: Double? = nil
        var date: (day: Int, month: Int, year: Int)?
        var modeIndicator: UInt8?
    }

    /// Fix data.
    struct GGA: Sendable {
        var time: Int?
        @CompactDouble var latitude: Double? = nil
        @CompactDouble var longitude: Double? = nil
        var quality: Int?
        var satellites: Int?
        @CompactDouble var hdop: Double? = nil
        @CompactDouble var altitude: Double? = nil
    }

    /// Multi-constellation fix data.
    struct GNS: Sendable {
        var time: Int?
        @CompactDouble var latitude: Double? = nil
        @CompactDouble var longitude: Double? = nil
        /// The first mode character (GPS), and whether any system has a fix.
        var modeIndicator: UInt8?
        var anyFix: Bool
        var satellites: Int?
        @CompactDouble var hdop: Double? = nil
        @CompactDouble var altitude: Double? = nil
    }

    /// Geographic position.
    struct GLL: Sendable {
        @CompactDouble var latitude: Double? = nil
        @CompactDouble var longitude: Double? = nil
        var time: Int?
        var status: UInt8?
        var modeIndicator: UInt8?
    }

    /// DOP and active satellites.
    struct GSA: Sendable {
        /// 1 no fix, 2 2D, 3 3D.
        var mode: Int?
        @CompactDouble var pdop: Double? = nil
        @CompactDouble var hdop: Double? = nil
        @CompactDouble var vdop: Double? = nil
    }

    /// Course and speed over ground.
    struct VTG: Sendable {
        @CompactDouble var courseTrue: Double? = nil
        @CompactDouble var speedKnots: Double? = nil
        @CompactDouble var speedKmh: Double? = nil
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
        @CompactDouble var latitudeError: Double? = nil
        @CompactDouble var longitudeError: Double? = nil
        @CompactDouble var altitudeError: Double? = nil
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
