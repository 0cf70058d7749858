import GatewayCore

/// Recognises the antenna status sentences receivers send unasked.
///
/// - u-blox: `$GxTXT,01,01,02,ANTSTATUS=OK|OPEN|SHORT` (INIT and DONTKNOW are not statuses).
/// - MediaTek / GlobalTop (PA6H and kin): `$PGTOP,11,n` with 1 = active antenna shorted,
///   2 = using the internal antenna, 3 = using the active (external) antenna (GlobalTop
///   FGPMMOPA6H data sheet, "Antenna Advisor"). 2 is reported as `open`: the receiver found no
///   active antenna drawing current and fell back to its patch, which is what a cut or unplugged
///   external antenna looks like.
enum AntennaSentence {
    /// The status in a checked sentence body (between `$` and `*`), or nil for any other sentence.
    static func status(body: UnsafeRawBufferPointer) -> AntennaStatus? {
        let n = body.count
        guard n >= 9 else { return nil }
        if body[0] == 0x50 {  // `PGTOP,11,n`
            guard n >= 10, matches(body, at: 0, "PGTOP,11,") else { return nil }
            switch body[9] {
            case 0x31: return .short
            case 0x32: return .open
            case 0x33: return .ok
            default: return nil
            }
        }
        guard matches(body, at: 2, "TXT,") else { return nil }
        let key: StaticString = "ANTSTATUS="
        let k = key.utf8CodeUnitCount
        var i = 6
        while i + k <= n {
            if matches(body, at: i, key) {
                let value = UnsafeRawBufferPointer(rebasing: body[(i + k)...])
                if value.starts(with: "OK".utf8) { return .ok }
                if value.starts(with: "OPEN".utf8) { return .open }
                if value.starts(with: "SHORT".utf8) { return .short }
                return nil
            }
            i += 1
        }
        return nil
    }

    private static func matches(_ body: UnsafeRawBufferPointer, at offset: Int, _ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard offset + count <= body.count else { return false }
        let p = text.utf8Start
        for j in 0..<count where body[offset + j] != p[j] { return false }
        return true
    }
}
