/// Powers of ten as constants, for the number readers and writers on the hot paths (the NMEA
/// field reader, the JSON writer): a switch of constants compiles to a table lookup, with no
/// lazily initialised global to check on every call.
public enum PowersOfTen {
    /// 10^e for e in 0...19 (10^19 is the last below 2^64; larger `e` give 10^19).
    @inlinable @inline(__always)
    public static func integer(_ e: Int) -> UInt64 {
        switch e {
        case 0: 1
        case 1: 10
        case 2: 100
        case 3: 1_000
        case 4: 10_000
        case 5: 100_000
        case 6: 1_000_000
        case 7: 10_000_000
        case 8: 100_000_000
        case 9: 1_000_000_000
        case 10: 10_000_000_000
        case 11: 100_000_000_000
        case 12: 1_000_000_000_000
        case 13: 10_000_000_000_000
        case 14: 100_000_000_000_000
        case 15: 1_000_000_000_000_000
        case 16: 10_000_000_000_000_000
        case 17: 100_000_000_000_000_000
        case 18: 1_000_000_000_000_000_000
        default: 10_000_000_000_000_000_000
        }
    }
}
