/// One fix per receiver epoch: the value that flows through every pipeline.
///
/// Coordinates are in ``datum``; a position with ``mode`` `.noFix` may carry no coordinates.
/// Field names in JSON output follow gpsd's TPV report where one exists (see PositionEncoding's `PositionJSON`).
public struct Position: Sendable, Hashable {
    /// UTC instant of the fix; nil until a date is known.
    public var time: Timestamp?
    // Mode and quality (a byte each) next to the time's optional flag fill its padding: after
    // the course they would cost the position 8 bytes.
    public var mode: FixMode
    public var quality: FixQuality?
    /// Degrees in ``datum`` (or nil without a fix).
    @CompactDouble public var latitude: Double?
    /// Degrees in ``datum`` (or nil without a fix).
    @CompactDouble public var longitude: Double?
    /// Metres above mean sea level.
    @CompactDouble public var altitude: Double?
    /// Metres per second over ground.
    @CompactDouble public var speed: Double?
    /// Degrees true.
    @CompactDouble public var course: Double?
    /// Satellites used in the fix, 0 to ``maximumSatellites``.
    public var satellites: Int?
    @CompactDouble public var hdop: Double?
    @CompactDouble public var vdop: Double?
    @CompactDouble public var pdop: Double?
    /// Metres, 1-sigma horizontal (GST, or gpsd's eph).
    @CompactDouble public var horizontalError: Double?
    /// Metres, 1-sigma vertical (GST altitude error, or gpsd's epv).
    @CompactDouble public var verticalError: Double?
    /// Degrees true: vehicle heading (HDT/THS), distinct from course over ground.
    @CompactDouble public var heading: Double?
    public var datum: Datum
    /// Easting in metres when ``datum`` is a projected CRS.
    @CompactDouble public var x: Double?
    /// Northing in metres when ``datum`` is a projected CRS.
    @CompactDouble public var y: Double?
    /// Id of the component that produced the position.
    public var source: String
    /// Device id: a config value, a serial number, a gpsd device path.
    public var device: String?
    /// Stable unique id: the idempotency key downstream.
    public var id: String {
        get { identifier.description }
        set { identifier = PositionID(newValue) }
    }
    /// ``id`` as its parts: a numbered id's text is built only when somebody reads ``id``.
    public var identifier: PositionID
    /// String map for enrichment (geofence names, static tags).
    public var attributes: [String: String]
    /// Set on geofence transitions and receiver health events.
    @inlinable public var event: PositionEvent? {
        get { _event?.value }
        set { _event = newValue.map(ValueBox.init) }
    }

    /// Most positions carry no event: boxed, it takes 8 bytes instead of 64.
    @usableFromInline var _event: ValueBox<PositionEvent>?

    /// What a receiver's binary protocol reports beyond NMEA's fields (u-blox NAV-PVT): nil
    /// for most positions. Setting one with no figure in it stores nil.
    @inlinable public var detail: FixDetail? {
        get { _detail?.value }
        set { _detail = newValue.flatMap { $0.isEmpty ? nil : ValueBox($0) } }
    }

    /// Boxed like the event: typed figures cost a UBX position one allocation where a
    /// dictionary of their text cost four fifths of its decoding, and an NMEA position nothing.
    @usableFromInline var _detail: ValueBox<FixDetail>?

    /// Metres above the WGS84 ellipsoid (gpsd's `altHAE`); ``altitude`` is above mean sea level.
    public var ellipsoidHeight: Double? {
        get { _detail?.value.ellipsoidHeight }
        set { var d = detail ?? FixDetail(); d.ellipsoidHeight = newValue; detail = d }
    }
    /// Metres per second, the speed's accuracy estimate (gpsd's `eps`).
    public var speedError: Double? {
        get { _detail?.value.speedError }
        set { var d = detail ?? FixDetail(); d.speedError = newValue; detail = d }
    }
    /// Degrees, the course's (and heading's) accuracy estimate (gpsd's `epd`).
    public var courseError: Double? {
        get { _detail?.value.courseError }
        set { var d = detail ?? FixDetail(); d.courseError = newValue; detail = d }
    }
    /// Seconds since the differential corrections in use were received (gpsd's `dgpsAge`).
    public var correctionAge: Double? {
        get { _detail?.value.correctionAge }
        set { var d = detail ?? FixDetail(); d.correctionAge = newValue; detail = d }
    }

    /// The largest satellite count a position may carry: every decoder refuses a larger one
    /// (more than all GNSS constellations fly), so whatever locgate writes, it reads back.
    public static let maximumSatellites = 999

    public init(
        time: Timestamp? = nil, latitude: Double? = nil, longitude: Double? = nil,
        altitude: Double? = nil, speed: Double? = nil, course: Double? = nil,
        mode: FixMode = .noFix, quality: FixQuality? = nil, satellites: Int? = nil,
        hdop: Double? = nil, vdop: Double? = nil, pdop: Double? = nil,
        horizontalError: Double? = nil, verticalError: Double? = nil, heading: Double? = nil,
        datum: Datum = .wgs84, x: Double? = nil, y: Double? = nil,
        source: String = "", device: String? = nil, id: String = "",
        attributes: [String: String] = [:], event: PositionEvent? = nil, detail: FixDetail? = nil
    ) {
        self.time = time; self.latitude = latitude; self.longitude = longitude
        self.altitude = altitude; self.speed = speed; self.course = course
        self.mode = mode; self.quality = quality; self.satellites = satellites
        self.hdop = hdop; self.vdop = vdop; self.pdop = pdop
        self.horizontalError = horizontalError; self.verticalError = verticalError
        self.heading = heading; self.datum = datum; self.x = x; self.y = y
        self.source = source; self.device = device; self.identifier = PositionID(id)
        self.attributes = attributes; _event = event.map(ValueBox.init)
        _detail = detail.flatMap { $0.isEmpty ? nil : ValueBox($0) }
    }

    /// True when the position carries both coordinates.
    @inlinable public var hasCoordinates: Bool { latitude != nil && longitude != nil }

    /// The key that groups positions of one receiver: device id, else source id.
    @inlinable public var deviceKey: String { device ?? source }
}

/// A `Double?` in 8 bytes instead of 16: nil is one signalling-NaN bit pattern.
///
/// A position's optional numbers are half of it, and a position is copied into every batch and
/// read by every sink. Arithmetic never yields the pattern (x86-64 and ARM quiet a signalling
/// NaN), so every value a `Double?` holds, NaN included, reads back as itself. Equality and
/// hashing are those of the `Double?` it stands for.
@propertyWrapper
public struct CompactDouble: Sendable, Hashable, CustomDebugStringConvertible {
    @usableFromInline var bits: UInt64

    /// The pattern of nil: a signalling NaN with a payload no computation produces.
    @inlinable static var none: UInt64 { 0x7FF4_C0DE_0000_0001 }

    @inlinable public init(wrappedValue: Double?) {
        bits = wrappedValue?.bitPattern ?? Self.none
    }

    @inlinable public var wrappedValue: Double? {
        get { bits == Self.none ? nil : Double(bitPattern: bits) }
        set { bits = newValue?.bitPattern ?? Self.none }
    }

    public static func == (a: CompactDouble, b: CompactDouble) -> Bool { a.wrappedValue == b.wrappedValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(wrappedValue) }
    public var debugDescription: String { String(describing: wrappedValue) }
}

/// A value behind a pointer, for a position's rarely set parts; compared and hashed by value.
@usableFromInline
final class ValueBox<Value: Sendable & Hashable>: Sendable, Hashable, CustomDebugStringConvertible {
    @usableFromInline let value: Value

    @usableFromInline init(_ value: Value) { self.value = value }

    @usableFromInline static func == (a: ValueBox, b: ValueBox) -> Bool { a.value == b.value }
    @usableFromInline func hash(into hasher: inout Hasher) { hasher.combine(value) }
    @usableFromInline var debugDescription: String { String(describing: value) }
}

/// The figures of a fix that NMEA 0183 does not carry and a binary protocol does (u-blox
/// NAV-PVT), named in JSON as gpsd's TPV names them.
public struct FixDetail: Sendable, Hashable {
    /// Metres above the WGS84 ellipsoid (`altHAE`).
    @CompactDouble public var ellipsoidHeight: Double?
    /// Metres per second, 1-sigma-like accuracy estimate of the speed (`eps`).
    @CompactDouble public var speedError: Double?
    /// Degrees, accuracy estimate of the course (`epd`).
    @CompactDouble public var courseError: Double?
    /// Seconds since the differential corrections in use were received (`dgpsAge`).
    @CompactDouble public var correctionAge: Double?

    public init(ellipsoidHeight: Double? = nil, speedError: Double? = nil, courseError: Double? = nil, correctionAge: Double? = nil) {
        self.ellipsoidHeight = ellipsoidHeight; self.speedError = speedError
        self.courseError = courseError; self.correctionAge = correctionAge
    }

    /// True when no figure is set.
    public var isEmpty: Bool { ellipsoidHeight == nil && speedError == nil && courseError == nil && correctionAge == nil }
}

/// gpsd's TPV `mode`.
public enum FixMode: Int, Sendable, Hashable, Comparable, CaseIterable {
    case unknown = 0
    case noFix = 1
    case twoD = 2
    case threeD = 3

    public static func < (a: FixMode, b: FixMode) -> Bool { a.rawValue < b.rawValue }

    /// Config spelling: `none`, `2d`, `3d`.
    public var configName: String {
        switch self {
        case .unknown, .noFix: "none"
        case .twoD: "2d"
        case .threeD: "3d"
        }
    }

    /// Config spelling: `none`, `2d`, `3d`.
    public init?(configName: String) {
        switch configName.lowercased() {
        case "none", "nofix", "no_fix": self = .noFix
        case "2d": self = .twoD
        case "3d": self = .threeD
        default: return nil
        }
    }
}

/// gpsd's TPV `status` values, which NMEA GGA quality and RMC/GNS mode indicators map onto.
public enum FixQuality: Int, Sendable, Hashable, CaseIterable {
    case unknown = 0
    case gps = 1
    case dgps = 2
    case rtkFixed = 3
    case rtkFloat = 4
    case estimated = 5   // dead reckoning
    case gnssDeadReckoning = 6
    case manual = 7      // time only / surveyed / manual input
    case simulated = 8
    case precise = 9     // P(Y)

    public var name: String {
        switch self {
        case .unknown: "unknown"
        case .gps: "gps"
        case .dgps: "dgps"
        case .rtkFixed: "rtk_fixed"
        case .rtkFloat: "rtk_float"
        case .estimated: "estimated"
        case .gnssDeadReckoning: "gnss_dead_reckoning"
        case .manual: "manual"
        case .simulated: "simulated"
        case .precise: "precise"
        }
    }
}

/// The datum (or projected CRS) a position's coordinates are in.
public struct Datum: Sendable, Hashable, CustomStringConvertible {
    /// Lowercase canonical name: `wgs84`, `gcj02`, `bd09`, or `EPSG:<code>`.
    public let name: String

    public init(name: String) { self.name = name }

    public static let wgs84 = Datum(name: "wgs84")
    public static let gcj02 = Datum(name: "gcj02")
    public static let bd09 = Datum(name: "bd09")

    /// Parses a config spelling (`WGS84`, `wgs-84`, `GCJ02`, `bd09`, `EPSG:32650`, `epsg:4326`).
    public init?(parsing text: String) {
        let t = String(text.lowercased().filter { $0 != "-" && $0 != "_" })
        switch t {
        case "wgs84", "epsg:4326": self = .wgs84
        case "gcj02", "gcj": self = .gcj02
        case "bd09", "bd09ll", "baidu": self = .bd09
        default:
            guard t.hasPrefix("epsg:"), let code = Int(t.dropFirst(5)), code > 0 else { return nil }
            self.name = "EPSG:\(code)"
        }
    }

    /// EPSG code when this is an `EPSG:` datum.
    public var epsgCode: Int? {
        guard name.hasPrefix("EPSG:") else { return nil }
        return Int(name.dropFirst(5))
    }

    /// True for geographic datums whose coordinates are latitude/longitude degrees.
    public var isGeographic: Bool { epsgCode == nil }

    public var description: String { name }
}

/// Something that happened to a device, carried by a position: a geofence transition, a change
/// in the receiver's health, or a motion event (trips, stops, ignition, overspeed, idling).
///
/// Events travel through the pipeline like positions, so sinks get them in order with the fixes.
public struct PositionEvent: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Geofence transitions (the position that caused them).
        case enter, exit, dwell
        /// No position with a fix for `fix_timeout` (coordinates: the last fix, if any).
        case fixLost = "fix_lost"
        /// The first fix after `fix_lost` (the position is that fix).
        case fixRegained = "fix_regained"
        /// No bytes at all for `data_timeout`: unplugged, powered off, wrong baud rate.
        case noData = "no_data"
        /// Bytes again after `no_data`.
        case dataResumed = "data_resumed"
        /// The receiver reported a change of its antenna status (``PositionEvent/status``).
        case antenna
        /// The receiver reported a change of its jamming state (``PositionEvent/status``:
        /// `ok`, `warning`, `critical`; u-blox MON-RF / MON-HW).
        case jamming
        /// The receiver reported a change of its spoofing detection (``PositionEvent/status``:
        /// `none`, `indicated`, `multiple`; u-blox NAV-STATUS).
        case spoofing
        /// The fix became RTK fixed, RTK float, or left RTK (the position is the fix that shows it).
        case rtkFixed = "rtk_fixed", rtkFloat = "rtk_float", rtkLost = "rtk_lost"
        /// A command to the device changed status (``PositionEvent/status``: `queued`, `sent`,
        /// `delivered`, `done`, …; its id, type and result in the position's attributes).
        case command
        /// Motion events (the `motion` transform): the position is the fix where it happened,
        /// the details are attributes (`trip.*`, `stop.*`, `overspeed.*`, `idle.*`).
        case tripStart = "trip_start", tripEnd = "trip_end", stopStart = "stop_start", stopEnd = "stop_end"
        case ignitionOn = "ignition_on", ignitionOff = "ignition_off", overspeed, idle

        /// The geofence kinds: `enter`, `exit`, `dwell`.
        public static let fenceKinds: [Kind] = [.enter, .exit, .dwell]
        /// The motion kinds, in the order the `motion` transform documents them.
        public static let motionKinds: [Kind] = [.tripStart, .tripEnd, .stopStart, .stopEnd, .ignitionOn, .ignitionOff, .overspeed, .idle]

        /// True for `enter`, `exit` and `dwell`.
        public var isFence: Bool {
            switch self {
            case .enter, .exit, .dwell: true
            case .fixLost, .fixRegained, .noData, .dataResumed, .antenna, .jamming, .spoofing, .command: false
            case .rtkFixed, .rtkFloat, .rtkLost: false
            case .tripStart, .tripEnd, .stopStart, .stopEnd, .ignitionOn, .ignitionOff, .overspeed, .idle: false
            }
        }
    }
    public var kind: Kind
    /// The fence of a geofence event; nil for health and motion events.
    public var fenceId: String?
    public var fenceName: String?
    /// The state an `antenna` (`ok`, `open`, `short`), `jamming` (`ok`, `warning`, `critical`)
    /// or `spoofing` (`none`, `indicated`, `multiple`) event reports.
    public var status: String?

    public init(kind: Kind, fenceId: String? = nil, fenceName: String? = nil, status: String? = nil) {
        self.kind = kind; self.fenceId = fenceId; self.fenceName = fenceName; self.status = status
    }
}

/// Geofence code names the event type after what it carries there.
public typealias FenceEvent = PositionEvent
