import GatewayCore

/// The bytes that put a receiver to sleep and wake it, per duty-cycle method.
public enum ReceiverPowerCommands {
    /// A UBX frame: sync `B5 62`, class, id, little-endian length, payload, 8-bit Fletcher checksum
    /// over class through payload.
    public static func ubx(class messageClass: UInt8, id: UInt8, payload: [UInt8]) -> [UInt8] {
        let body = [messageClass, id, UInt8(payload.count & 0xFF), UInt8(payload.count >> 8)] + payload
        var a: UInt8 = 0
        var b: UInt8 = 0
        for byte in body {
            a &+= byte
            b &+= a
        }
        return [0xB5, 0x62] + body + [a, b]
    }

    /// UBX-RXM-PMREQ (0x02 0x41), the 16-byte form of u-blox 8 and later: version 0, duration 0
    /// (until woken), flags backup | force (0x06), wake-up source UART RX (0x08).
    ///
    /// Receivers older than u-blox 8 know only an 8-byte form without wake-up sources; this preset
    /// does not cover them (use method `close`, or power them from a switched line).
    public static let ubloxBackup: [UInt8] = ubx(class: 0x02, id: 0x41, payload: [
        0x00, 0x00, 0x00, 0x00,   // version, reserved
        0x00, 0x00, 0x00, 0x00,   // duration ms: 0 = until woken
        0x06, 0x00, 0x00, 0x00,   // flags: backup (bit 1) | force (bit 2)
        0x08, 0x00, 0x00, 0x00,   // wakeupSources: uartrx (bit 3)
    ])

    /// MediaTek / Quectel `$PMTK161,0*28`: standby until any byte arrives on RX.
    public static let mtkStandby: [UInt8] = Array("$PMTK161,0*28\r\n".utf8)

    /// Any byte wakes both chips from these modes; 0xFF is not the start of any UBX or NMEA message.
    public static let wakeByte: [UInt8] = [0xFF]

    /// What is written at the end of a window; empty for `close`.
    public static func sleep(_ c: DutyCycleConfiguration) -> [UInt8] {
        switch c.method {
        case .ublox?: ubloxBackup
        case .mtk?: mtkStandby
        case .commands?: lines(c.sleep)
        case .close?, nil: []
        }
    }

    /// What is written at the start of a window; empty for `close`.
    public static func wake(_ c: DutyCycleConfiguration) -> [UInt8] {
        switch c.method {
        case .ublox?, .mtk?: wakeByte
        case .commands?: lines(c.wake)
        case .close?, nil: []
        }
    }

    private static func lines(_ lines: [String]) -> [UInt8] {
        lines.flatMap { Array($0.utf8) + [13, 10] }
    }
}
