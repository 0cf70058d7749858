import UBX

/// UBX-CFG-VALSET: sets items of the configuration database in the layers named.
///
/// Payload: version 0, the layers bit mask, two reserved bytes, then each key id (U4, little
/// endian) followed by its value in the key's size. u-blox allows 64 items per message; more
/// are split over several messages by the caller (``ReceiverInit``).
public enum UBXValset {
    /// Where a value is written: RAM (now), battery-backed RAM (kept while the backup supply
    /// lasts) or flash (kept across power loss, on receivers that have it).
    public struct Layers: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let ram = Layers(rawValue: 0x01)
        public static let bbr = Layers(rawValue: 0x02)
        public static let flash = Layers(rawValue: 0x04)
    }

    /// Items per message u-blox accepts.
    public static let maximumItems = 64

    /// A value checked against its key's type, as the bytes it takes.
    public struct Item: Sendable, Hashable {
        public let key: UBXConfigKey
        /// The value's bits, little endian in `key.type.size` bytes when written.
        public let bits: UInt64

        public init(key: UBXConfigKey, bits: UInt64) {
            self.key = key
            self.bits = bits
        }

        /// `CFG-RATE-MEAS=100`, for logs.
        public var text: String {
            switch key.type {
            case .bool: "\(key.name)=\(bits != 0)"
            case .r4: "\(key.name)=\(Float(bitPattern: UInt32(truncatingIfNeeded: bits)))"
            case .r8: "\(key.name)=\(Double(bitPattern: bits))"
            case .i1, .i2, .i4, .i8:
                "\(key.name)=\(Int64(bitPattern: bits << (64 - 8 * key.type.size)) >> (64 - 8 * key.type.size))"
            default: "\(key.name)=\(bits)"
            }
        }
    }

    /// Why a value does not fit its key.
    public enum ValueProblem: Error, Equatable, Sendable {
        case expectedBool
        case expectedNumber
        case outOfRange(String)
    }

    /// The bits of `value` for `key`: a bool for L, a whole number in range for the integer
    /// types, any number for R4/R8. `value` is a JSON number or bool; integer types also take a
    /// `0x…` string (for 64-bit values JSON numbers cannot hold exactly).
    public static func bits(for key: UBXConfigKey, number: Double?, bool: Bool?, hex: String?) -> Result<UInt64, ValueProblem> {
        let type = key.type
        if type == .bool {
            if let bool { return .success(bool ? 1 : 0) }
            if let number, number == 0 || number == 1 { return .success(UInt64(number)) }
            return .failure(.expectedBool)
        }
        if let hex, !type.isFloat {
            let digits = hex.lowercased().hasPrefix("0x") ? String(hex.dropFirst(2)) : ""
            guard let v = UInt64(digits, radix: 16) else { return .failure(.expectedNumber) }
            guard type.size == 8 || v < (1 << (8 * UInt64(type.size))) else { return .failure(.outOfRange(range(type))) }
            return .success(v)
        }
        guard let n = number else { return .failure(.expectedNumber) }
        switch type {
        case .r4:
            guard n.isFinite, abs(n) <= Double(Float.greatestFiniteMagnitude) else { return .failure(.outOfRange(range(type))) }
            return .success(UInt64(Float(n).bitPattern))
        case .r8:
            guard n.isFinite else { return .failure(.outOfRange(range(type))) }
            return .success(n.bitPattern)
        default:
            // Whole numbers JSON holds exactly (±2^53); 64-bit values beyond that come as 0x….
            guard n == n.rounded(), abs(n) <= 9_007_199_254_740_992 else { return .failure(.outOfRange(range(type))) }
            let bitsWide = 8 * type.size
            if type.isSigned {
                let v = Int64(n)
                let lo = bitsWide == 64 ? Int64.min : -(Int64(1) << (bitsWide - 1))
                let hi = bitsWide == 64 ? Int64.max : (Int64(1) << (bitsWide - 1)) - 1
                guard v >= lo && v <= hi else { return .failure(.outOfRange(range(type))) }
                let mask: UInt64 = bitsWide == 64 ? .max : (1 << UInt64(bitsWide)) - 1
                return .success(UInt64(bitPattern: v) & mask)
            }
            guard n >= 0 else { return .failure(.outOfRange(range(type))) }
            let v = UInt64(n)
            guard bitsWide == 64 || v < (1 << UInt64(bitsWide)) else { return .failure(.outOfRange(range(type))) }
            return .success(v)
        }
    }

    /// The range of a type as error messages say it.
    public static func range(_ type: UBXConfigKey.ValueType) -> String {
        switch type {
        case .bool: "true or false"
        case .r4, .r8: "a finite number (\(type.rawValue))"
        case .i1: "a whole number -128…127 (I1)"
        case .i2: "a whole number -32768…32767 (I2)"
        case .i4: "a whole number -2147483648…2147483647 (I4)"
        case .i8: "a whole number (I8; beyond ±2^53 as \"0x…\")"
        case .u8, .x8: "a whole number ≥ 0 (\(type.rawValue); beyond 2^53 as \"0x…\")"
        default: "a whole number 0…\((UInt64(1) << UInt64(8 * type.size)) - 1) (\(type.rawValue))"
        }
    }

    /// The CFG-VALSET payload that sets `items` (at most ``maximumItems``) in `layers`.
    public static func payload(_ items: [Item], layers: Layers) -> [UInt8] {
        precondition(items.count <= maximumItems, "CFG-VALSET takes at most 64 items")
        var out: [UInt8] = [0x00, layers.rawValue, 0x00, 0x00]
        out.reserveCapacity(4 + items.count * 12)
        for item in items {
            withUnsafeBytes(of: item.key.id.littleEndian) { out += $0 }
            withUnsafeBytes(of: item.bits.littleEndian) { out += $0.prefix(item.key.type.size) }
        }
        return out
    }

    /// The whole frame.
    public static func frame(_ items: [Item], layers: Layers) -> [UInt8] {
        UBXFrame.encode(.cfgValset, payload: payload(items, layers: layers))
    }
}
