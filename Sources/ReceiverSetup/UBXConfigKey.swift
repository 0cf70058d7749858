/// One item of a u-blox generation 9+ receiver's configuration database (CFG-VALSET, CFG-VALGET):
/// a 32-bit key id, the value's type and u-blox's name (`CFG-RATE-MEAS`).
///
/// The storage size is also in the key id (bits 28–30: 1 bit, 1, 2, 4 or 8 bytes); the type
/// adds what the id does not say (signed, enumeration, float), so a value is checked against
/// its range before anything is written to the receiver.
public struct UBXConfigKey: Sendable, Hashable {
    /// The value types of the configuration database (u-blox: L, U1…U8, I1…I8, E1…E4, X1…X8, R4, R8).
    public enum ValueType: String, Sendable, Hashable, CaseIterable {
        case bool = "L"
        case u1 = "U1", u2 = "U2", u4 = "U4", u8 = "U8"
        case i1 = "I1", i2 = "I2", i4 = "I4", i8 = "I8"
        case e1 = "E1", e2 = "E2", e4 = "E4"
        case x1 = "X1", x2 = "X2", x4 = "X4", x8 = "X8"
        case r4 = "R4", r8 = "R8"

        /// Bytes the value takes in a CFG-VALSET (a bool takes one).
        public var size: Int {
            switch self {
            case .bool, .u1, .i1, .e1, .x1: 1
            case .u2, .i2, .e2, .x2: 2
            case .u4, .i4, .e4, .x4, .r4: 4
            case .u8, .i8, .x8, .r8: 8
            }
        }

        public var isSigned: Bool { [.i1, .i2, .i4, .i8].contains(self) }
        public var isFloat: Bool { self == .r4 || self == .r8 }

        /// The type a key id's size bits imply when the key is not in the table: unsigned
        /// (bitfield) of that size, or a bool; nil for the size codes u-blox does not use.
        public static func implied(by id: UInt32) -> ValueType? {
            switch (id >> 28) & 0x07 {
            case 1: .bool
            case 2: .x1
            case 3: .x2
            case 4: .x4
            case 5: .x8
            default: nil
            }
        }
    }

    public let name: String
    public let id: UInt32
    public let type: ValueType
    /// What the key sets, for `locgate` documentation and error messages.
    public let summary: String

    public init(_ name: String, _ id: UInt32, _ type: ValueType, _ summary: String = "") {
        self.name = name
        self.id = id
        self.type = type
        self.summary = summary
    }

    /// Keys by name that a configuration may use without giving the id; any other key is given
    /// as `0x…` (its id from the receiver's interface description). Ids and types are those of
    /// the ZED-F9P interface description (HPG 1.32), the same on F9R/F9T/M10 where the key exists.
    public static let common: [UBXConfigKey] = [
        UBXConfigKey("CFG-RATE-MEAS", 0x30210001, .u2, "measurement period, ms (100 = 10 Hz)"),
        UBXConfigKey("CFG-RATE-NAV", 0x30210002, .u2, "measurements per navigation solution"),
        UBXConfigKey("CFG-RATE-TIMEREF", 0x20210003, .e1, "time system of the rate (0 UTC, 1 GPS)"),
        UBXConfigKey("CFG-NAVSPG-DYNMODEL", 0x20110021, .e1, "dynamic platform model (0 portable, 2 stationary, 3 pedestrian, 4 automotive, 5 sea, 6–8 airborne, 11 mower)"),
        UBXConfigKey("CFG-NAVSPG-FIXMODE", 0x20110011, .e1, "position fix mode (1 2D only, 2 3D only, 3 auto)"),
        UBXConfigKey("CFG-NAVSPG-INFIL_MINELEV", 0x201100A4, .i1, "minimum satellite elevation, degrees"),
        UBXConfigKey("CFG-NAVSPG-INFIL_MINCNO", 0x201100A3, .u1, "minimum C/N0 of a satellite used, dBHz"),
        UBXConfigKey("CFG-NAVSPG-USE_PPP", 0x10110019, .bool, "precise point positioning (M8 timing receivers)"),
        UBXConfigKey("CFG-NAVHPG-DGNSSMODE", 0x20140011, .e1, "RTK mode (2 float only, 3 fixed when possible)"),
        UBXConfigKey("CFG-UART1-BAUDRATE", 0x40520001, .u4, "UART1 baud rate"),
        UBXConfigKey("CFG-UART2-BAUDRATE", 0x40530001, .u4, "UART2 baud rate"),
        UBXConfigKey("CFG-UART1INPROT-UBX", 0x10730001, .bool, "UBX accepted on UART1"),
        UBXConfigKey("CFG-UART1INPROT-NMEA", 0x10730002, .bool, "NMEA accepted on UART1"),
        UBXConfigKey("CFG-UART1INPROT-RTCM3X", 0x10730004, .bool, "RTCM 3 accepted on UART1 (corrections)"),
        UBXConfigKey("CFG-UART1OUTPROT-UBX", 0x10740001, .bool, "UBX sent on UART1"),
        UBXConfigKey("CFG-UART1OUTPROT-NMEA", 0x10740002, .bool, "NMEA sent on UART1"),
        UBXConfigKey("CFG-UART1OUTPROT-RTCM3X", 0x10740004, .bool, "RTCM 3 sent on UART1 (a base station)"),
        UBXConfigKey("CFG-UART2INPROT-RTCM3X", 0x10750004, .bool, "RTCM 3 accepted on UART2"),
        UBXConfigKey("CFG-USBINPROT-UBX", 0x10770001, .bool, "UBX accepted on USB"),
        UBXConfigKey("CFG-USBINPROT-NMEA", 0x10770002, .bool, "NMEA accepted on USB"),
        UBXConfigKey("CFG-USBINPROT-RTCM3X", 0x10770004, .bool, "RTCM 3 accepted on USB (corrections)"),
        UBXConfigKey("CFG-USBOUTPROT-UBX", 0x10780001, .bool, "UBX sent on USB"),
        UBXConfigKey("CFG-USBOUTPROT-NMEA", 0x10780002, .bool, "NMEA sent on USB"),
        UBXConfigKey("CFG-USBOUTPROT-RTCM3X", 0x10780004, .bool, "RTCM 3 sent on USB"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_PVT_I2C", 0x20910006, .u1, "NAV-PVT every N solutions on I2C (0 off)"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_PVT_UART1", 0x20910007, .u1, "NAV-PVT every N solutions on UART1 (0 off)"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_PVT_UART2", 0x20910008, .u1, "NAV-PVT every N solutions on UART2 (0 off)"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_PVT_USB", 0x20910009, .u1, "NAV-PVT every N solutions on USB (0 off)"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_STATUS_UART1", 0x2091001B, .u1, "NAV-STATUS rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_STATUS_USB", 0x2091001D, .u1, "NAV-STATUS rate on USB"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_SAT_UART1", 0x20910016, .u1, "NAV-SAT rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_SAT_USB", 0x20910018, .u1, "NAV-SAT rate on USB"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_EOE_UART1", 0x20910160, .u1, "NAV-EOE rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-UBX_NAV_EOE_USB", 0x20910162, .u1, "NAV-EOE rate on USB"),
        UBXConfigKey("CFG-MSGOUT-UBX_MON_RF_UART1", 0x2091035A, .u1, "MON-RF rate on UART1 (jamming, antenna)"),
        UBXConfigKey("CFG-MSGOUT-UBX_MON_RF_USB", 0x2091035C, .u1, "MON-RF rate on USB (jamming, antenna)"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GGA_UART1", 0x209100BB, .u1, "GGA rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GGA_USB", 0x209100BD, .u1, "GGA rate on USB"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_RMC_UART1", 0x209100AC, .u1, "RMC rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_RMC_USB", 0x209100AE, .u1, "RMC rate on USB"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_VTG_UART1", 0x209100B1, .u1, "VTG rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_VTG_USB", 0x209100B3, .u1, "VTG rate on USB"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GSA_UART1", 0x209100C0, .u1, "GSA rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GSA_USB", 0x209100C2, .u1, "GSA rate on USB"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GSV_UART1", 0x209100C5, .u1, "GSV rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GSV_USB", 0x209100C7, .u1, "GSV rate on USB"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GLL_UART1", 0x209100CA, .u1, "GLL rate on UART1"),
        UBXConfigKey("CFG-MSGOUT-NMEA_ID_GLL_USB", 0x209100CC, .u1, "GLL rate on USB"),
        UBXConfigKey("CFG-NMEA-HIGHPREC", 0x10930006, .bool, "NMEA with 7 decimals of minutes (high precision mode)"),
        UBXConfigKey("CFG-ITFM-ENABLE", 0x1041000D, .bool, "jamming/interference monitor"),
        UBXConfigKey("CFG-SIGNAL-GPS_ENA", 0x1031001F, .bool, "GPS"),
        UBXConfigKey("CFG-SIGNAL-SBAS_ENA", 0x10310020, .bool, "SBAS"),
        UBXConfigKey("CFG-SIGNAL-GAL_ENA", 0x10310021, .bool, "Galileo"),
        UBXConfigKey("CFG-SIGNAL-BDS_ENA", 0x10310022, .bool, "BeiDou"),
        UBXConfigKey("CFG-SIGNAL-QZSS_ENA", 0x10310024, .bool, "QZSS"),
        UBXConfigKey("CFG-SIGNAL-GLO_ENA", 0x10310025, .bool, "GLONASS"),
        UBXConfigKey("CFG-TMODE-MODE", 0x20030001, .e1, "time mode (0 off, 1 survey-in, 2 fixed: a base station)"),
    ]

    private static let byName: [String: UBXConfigKey] = Dictionary(common.map { (normalized($0.name), $0) }, uniquingKeysWith: { a, _ in a })

    /// The key named `name` (u-blox's spelling, `CFG-RATE-MEAS`; `CFG_RATE_MEAS` and any case are
    /// accepted), or one given by its id (`0x30210001`, typed by its size bits).
    public static func named(_ name: String) -> UBXConfigKey? {
        if let key = byName[normalized(name)] { return key }
        let lower = name.lowercased()
        guard lower.hasPrefix("0x"), let id = UInt32(lower.dropFirst(2), radix: 16) else { return nil }
        if let key = common.first(where: { $0.id == id }) { return key }
        return ValueType.implied(by: id).map { UBXConfigKey(name, id, $0) }
    }

    /// Names compared without case and with `_` and `-` alike (u-blox writes both in one name).
    static func normalized(_ name: String) -> String {
        String(name.uppercased().map { $0 == "_" ? "-" : $0 })
    }
}
