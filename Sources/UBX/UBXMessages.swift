import GatewayCore

/// UBX-NAV-PVT: the navigation solution of one epoch (92-byte payload; the 84-byte form of
/// protocol 14 to 15, without headVeh/magDec, is read too).
public struct NavPVT: Sendable, Equatable {
    public var iTOW: UInt32
    public var year: UInt16, month: UInt8, day: UInt8, hour: UInt8, minute: UInt8, second: UInt8
    /// bit 0 validDate, 1 validTime, 2 fullyResolved, 3 validMag.
    public var valid: UInt8
    public var tAcc: UInt32
    /// Fraction of the second in ns, −1e9…1e9 (may be negative).
    public var nano: Int32
    /// 0 no fix, 1 dead reckoning only, 2 2D, 3 3D, 4 GNSS + dead reckoning, 5 time only.
    public var fixType: UInt8
    /// bit 0 gnssFixOK, 1 diffSoln, 2–4 psmState, 5 headVehValid, 6–7 carrSoln.
    public var flags: UInt8
    public var flags2: UInt8
    public var numSV: UInt8
    /// 1e-7 degrees.
    public var lon: Int32, lat: Int32
    /// Millimetres above the ellipsoid and above mean sea level.
    public var height: Int32, hMSL: Int32
    /// Millimetres.
    public var hAcc: UInt32, vAcc: UInt32
    /// Millimetres per second.
    public var velN: Int32, velE: Int32, velD: Int32, gSpeed: Int32
    /// 1e-5 degrees.
    public var headMot: Int32
    /// Millimetres per second.
    public var sAcc: UInt32
    /// 1e-5 degrees.
    public var headAcc: UInt32
    /// 0.01.
    public var pDOP: UInt16
    /// bit 0 invalidLlh, 1–4 lastCorrectionAge.
    public var flags3: UInt16
    /// 1e-5 degrees; 0 in the 84-byte form.
    public var headVeh: Int32

    public var validDate: Bool { valid & 0x01 != 0 }
    public var validTime: Bool { valid & 0x02 != 0 }
    public var gnssFixOK: Bool { flags & 0x01 != 0 }
    public var diffSoln: Bool { flags & 0x02 != 0 }
    public var headVehValid: Bool { flags & 0x20 != 0 }
    /// 0 none, 1 float, 2 fixed.
    public var carrSoln: UInt8 { flags >> 6 }
    public var invalidLlh: Bool { flags3 & 0x01 != 0 }
    /// 0 not available, 1 = 0–1 s, 2 = 1–2 s, 3 = 2–5 s, … 12 = 120 s or more.
    public var lastCorrectionAge: UInt8 { UInt8((flags3 >> 1) & 0x0F) }

    /// Reads a payload; nil when it is shorter than 84 bytes.
    public init?(payload p: UnsafeRawBufferPointer) {
        guard p.count >= 84 else { return nil }
        let r = PayloadReader(bytes: p)
        iTOW = r.u4(0); year = r.u2(4); month = r.u1(6); day = r.u1(7); hour = r.u1(8); minute = r.u1(9); second = r.u1(10)
        valid = r.u1(11); tAcc = r.u4(12); nano = r.i4(16); fixType = r.u1(20); flags = r.u1(21); flags2 = r.u1(22); numSV = r.u1(23)
        lon = r.i4(24); lat = r.i4(28); height = r.i4(32); hMSL = r.i4(36); hAcc = r.u4(40); vAcc = r.u4(44)
        velN = r.i4(48); velE = r.i4(52); velD = r.i4(56); gSpeed = r.i4(60); headMot = r.i4(64)
        sAcc = r.u4(68); headAcc = r.u4(72); pDOP = r.u2(76); flags3 = r.u2(78)
        headVeh = p.count >= 88 ? r.i4(84) : 0
    }
}

/// UBX-NAV-STATUS: fix status and, from protocol 23.01 on, spoofing detection.
public struct NavStatus: Sendable, Equatable {
    public var iTOW: UInt32
    public var gpsFix: UInt8
    public var flags: UInt8
    public var fixStat: UInt8
    public var flags2: UInt8
    public var ttff: UInt32
    public var msss: UInt32

    /// 0 unknown or deactivated, 1 no spoofing indicated, 2 spoofing indicated, 3 multiple indications.
    public var spoofDetState: UInt8 { (flags2 >> 3) & 0x03 }

    public init?(payload p: UnsafeRawBufferPointer) {
        guard p.count >= 16 else { return nil }
        let r = PayloadReader(bytes: p)
        iTOW = r.u4(0); gpsFix = r.u1(4); flags = r.u1(5); fixStat = r.u1(6); flags2 = r.u1(7); ttff = r.u4(8); msss = r.u4(12)
    }
}

/// UBX-NAV-SAT: every satellite tracked, its signal strength and whether the fix used it.
public struct NavSat: Sendable, Equatable {
    public struct Satellite: Sendable, Equatable {
        public var gnssId: UInt8, svId: UInt8
        /// Carrier-to-noise density, dBHz.
        public var cno: UInt8
        public var elev: Int8
        public var azim: Int16
        public var prRes: Int16
        public var flags: UInt32
        /// The navigation solution used this satellite.
        public var used: Bool { flags & 0x08 != 0 }
    }

    public var iTOW: UInt32
    public var version: UInt8
    public var satellites: [Satellite]

    /// Reads a payload; nil unless its length is exactly 8 + 12 × numSvs.
    public init?(payload p: UnsafeRawBufferPointer) {
        guard p.count >= 8 else { return nil }
        let r = PayloadReader(bytes: p)
        let n = Int(r.u1(5))
        guard p.count == 8 + 12 * n else { return nil }
        iTOW = r.u4(0)
        version = r.u1(4)
        satellites = (0..<n).map { k in
            let o = 8 + 12 * k
            return Satellite(gnssId: r.u1(o), svId: r.u1(o + 1), cno: r.u1(o + 2), elev: r.i1(o + 3), azim: r.i2(o + 4),
                             prRes: r.i2(o + 6), flags: r.u4(o + 8))
        }
    }

    /// Satellites seen (a signal, C/N0 > 0), used in the fix, and the mean C/N0 of those used (dBHz).
    public var summary: (seen: Int, used: Int, meanUsedCNo: Double?) {
        var seen = 0, used = 0, sum = 0
        for s in satellites {
            if s.cno > 0 { seen += 1 }
            if s.used { used += 1; sum += Int(s.cno) }
        }
        return (seen, used, used > 0 ? Double(sum) / Double(used) : nil)
    }
}

/// UBX-MON-RF (protocol 27+): per RF block the jamming state, antenna status and power.
///
/// Two layouts exist: 24-byte blocks (the interface description) and the compact 20-byte
/// blocks of ZED-F9R firmware HPS 1.30, which have no flags byte and so no jamming state. The
/// layout is taken from the payload length, never guessed: anything else is refused.
public struct MonRF: Sendable, Equatable {
    public enum Layout: String, Sendable { case standard24, compact20 }

    public struct Block: Sendable, Equatable {
        public var blockId: UInt8
        /// 0 unknown, 1 ok, 2 warning, 3 critical; nil in the compact layout.
        public var jammingState: UInt8?
        /// 0 INIT, 1 DONTKNOW, 2 OK, 3 SHORT, 4 OPEN.
        public var antStatus: UInt8
        /// 0 OFF, 1 ON, 2 DONTKNOW.
        public var antPower: UInt8
        /// CW jamming indicator, 0 (none) to 255 (strong).
        public var jamInd: UInt8
        public var noisePerMS: UInt16
        public var agcCnt: UInt16
    }

    public var version: UInt8
    public var layout: Layout
    public var blocks: [Block]

    public init?(payload p: UnsafeRawBufferPointer) {
        guard p.count >= 4 else { return nil }
        let r = PayloadReader(bytes: p)
        let n = Int(r.u1(1))
        guard n > 0 else { return nil }
        version = r.u1(0)
        if p.count == 4 + 24 * n {
            layout = .standard24
            blocks = (0..<n).map { k in
                let o = 4 + 24 * k
                return Block(blockId: r.u1(o), jammingState: r.u1(o + 1) & 0x03, antStatus: r.u1(o + 2), antPower: r.u1(o + 3),
                             jamInd: r.u1(o + 16), noisePerMS: r.u2(o + 12), agcCnt: r.u2(o + 14))
            }
        } else if p.count == 4 + 20 * n {
            layout = .compact20
            blocks = (0..<n).map { k in
                let o = 4 + 20 * k
                return Block(blockId: r.u1(o), jammingState: nil, antStatus: r.u1(o + 1), antPower: r.u1(o + 2),
                             jamInd: r.u1(o + 3), noisePerMS: r.u2(o + 12), agcCnt: r.u2(o + 14))
            }
        } else {
            return nil
        }
    }
}

/// UBX-MON-HW (u-blox 6 to 9; 60 or 68 bytes): antenna status and power, jamming state.
public struct MonHW: Sendable, Equatable {
    /// 0 INIT, 1 DONTKNOW, 2 OK, 3 SHORT, 4 OPEN.
    public var aStatus: UInt8
    /// 0 OFF, 1 ON, 2 DONTKNOW.
    public var aPower: UInt8
    /// 0 unknown, 1 ok, 2 warning, 3 critical.
    public var jammingState: UInt8
    public var jamInd: UInt8

    public init?(payload p: UnsafeRawBufferPointer) {
        guard p.count == 60 || p.count == 68 else { return nil }
        let r = PayloadReader(bytes: p)
        aStatus = r.u1(20)
        aPower = r.u1(21)
        jammingState = (r.u1(22) >> 2) & 0x03
        jamInd = r.u1(p.count == 68 ? 53 : 45)
    }
}

/// UBX-ACK-ACK / ACK-NAK: the receiver's answer to a configuration message.
public struct UBXAcknowledgement: Sendable, Equatable {
    /// The message answered.
    public var message: UBXMessageID
    /// ACK-ACK (true) or ACK-NAK (false).
    public var accepted: Bool

    public init(message: UBXMessageID, accepted: Bool) {
        self.message = message
        self.accepted = accepted
    }

    public init?(id: UBXMessageID, payload p: UnsafeRawBufferPointer) {
        guard id == .ackAck || id == .ackNak, p.count == 2 else { return nil }
        message = UBXMessageID(p[0], p[1])
        accepted = id == .ackAck
    }
}

extension MonRF.Block {
    /// The antenna status as health events name it; nil for INIT and DONTKNOW.
    public var antenna: AntennaStatus? { UBXHealth.antenna(antStatus) }
}

/// Mappings of UBX status codes onto the health vocabulary of GatewayCore.
public enum UBXHealth {
    /// 2 OK, 3 SHORT, 4 OPEN; INIT (0) and DONTKNOW (1) say nothing.
    public static func antenna(_ code: UInt8) -> AntennaStatus? {
        switch code {
        case 2: .ok
        case 3: .short
        case 4: .open
        default: nil
        }
    }

    /// 1 ok, 2 warning, 3 critical; 0 (unknown, or monitoring off) says nothing.
    public static func jamming(_ code: UInt8) -> JammingState? {
        switch code {
        case 1: .ok
        case 2: .warning
        case 3: .critical
        default: nil
        }
    }

    /// 1 none, 2 indicated, 3 multiple; 0 (unknown, or detection off) says nothing.
    public static func spoofing(_ code: UInt8) -> SpoofingState? {
        switch code {
        case 1: .notIndicated
        case 2: .indicated
        case 3: .multiple
        default: nil
        }
    }
}
