import GatewayCore
import ReceiverSetup
import Testing
import UBX

/// CFG-VALSET frames and value checks; the expected frames were made by pyubx2 1.4.0
/// (`UBXMessage.config_set(...).serialize()`), an encoder written independently of this one.
@Suite struct ValsetTests {
    static func hex(_ s: String) -> [UInt8] { s.split(separator: " ").compactMap { UInt8($0, radix: 16) } }

    static func item(_ name: String, _ number: Double? = nil, bool: Bool? = nil, hex: String? = nil) throws -> UBXValset.Item {
        let key = try #require(UBXConfigKey.named(name))
        return UBXValset.Item(key: key, bits: try UBXValset.bits(for: key, number: number, bool: bool, hex: hex).get())
    }

    @Test func aValsetOfFourTypesIsTheFramePyubx2Writes() throws {
        let items = [try Self.item("CFG-RATE-MEAS", 100), try Self.item("CFG-USBINPROT-RTCM3X", bool: true),
                     try Self.item("CFG-NAVSPG-INFIL_MINELEV", -5), try Self.item("CFG-UART1-BAUDRATE", 115_200)]
        #expect(UBXValset.frame(items, layers: [.ram, .bbr]) == Self.hex("b5 62 06 8a 1c 00 00 03 00 00 01 00 21 30 64 00 04 00 77 10 01 a4 00 11 20 fb 01 00 52 40 00 c2 01 00 17 11"))
        #expect(UBXValset.frame([try Self.item("cfg_msgout_ubx_nav_pvt_usb", 1)], layers: .ram) == Self.hex("b5 62 06 8a 09 00 00 01 00 00 09 00 91 20 01 55 52"))
    }

    @Test func keysAreFoundByNameInAnySpellingOrById() throws {
        #expect(UBXConfigKey.named("CFG-RATE-MEAS")?.id == 0x3021_0001)
        #expect(UBXConfigKey.named("CFG_RATE_MEAS")?.id == 0x3021_0001)
        #expect(UBXConfigKey.named("0x30210001")?.name == "CFG-RATE-MEAS")
        // Not in the table: typed by the size bits of its id (0x5… = 8 bytes, 0x1… = one bit).
        #expect(UBXConfigKey.named("0x50360002")?.type == .x8)
        #expect(UBXConfigKey.named("0x10520005")?.type == .bool)
        #expect(UBXConfigKey.named("0x70000001") == nil)
        #expect(UBXConfigKey.named("CFG-RATE-MEASURE") == nil)
        // Every id in the table has size bits that agree with its type.
        for key in UBXConfigKey.common {
            #expect(UBXConfigKey.ValueType.implied(by: key.id)?.size == key.type.size, "\(key.name)")
        }
    }

    struct ValueCase: Sendable, CustomTestStringConvertible {
        let key: String, number: Double?, bool: Bool?, hex: String?, bits: UInt64?
        var testDescription: String { "\(key) \(number.map { "\($0)" } ?? bool.map { "\($0)" } ?? hex ?? "-") → \(bits.map(String.init) ?? "refused")" }
    }

    static let values: [ValueCase] = [
        ValueCase(key: "CFG-RATE-MEAS", number: 65535, bool: nil, hex: nil, bits: 65535),
        ValueCase(key: "CFG-RATE-MEAS", number: 65536, bool: nil, hex: nil, bits: nil),
        ValueCase(key: "CFG-RATE-MEAS", number: -1, bool: nil, hex: nil, bits: nil),
        ValueCase(key: "CFG-RATE-MEAS", number: 100.5, bool: nil, hex: nil, bits: nil),
        ValueCase(key: "CFG-RATE-MEAS", number: nil, bool: true, hex: nil, bits: nil),
        ValueCase(key: "CFG-RATE-MEAS", number: nil, bool: nil, hex: "0x64", bits: 100),
        ValueCase(key: "CFG-NAVSPG-INFIL_MINELEV", number: -128, bool: nil, hex: nil, bits: 0x80),
        ValueCase(key: "CFG-NAVSPG-INFIL_MINELEV", number: -129, bool: nil, hex: nil, bits: nil),
        ValueCase(key: "CFG-NAVSPG-INFIL_MINELEV", number: 127, bool: nil, hex: nil, bits: 127),
        ValueCase(key: "CFG-USBINPROT-RTCM3X", number: 1, bool: nil, hex: nil, bits: 1),
        ValueCase(key: "CFG-USBINPROT-RTCM3X", number: 2, bool: nil, hex: nil, bits: nil),
        ValueCase(key: "CFG-USBINPROT-RTCM3X", number: nil, bool: false, hex: nil, bits: 0),
        ValueCase(key: "CFG-UART1-BAUDRATE", number: 4_294_967_295, bool: nil, hex: nil, bits: 4_294_967_295),
        ValueCase(key: "CFG-UART1-BAUDRATE", number: 4_294_967_296, bool: nil, hex: nil, bits: nil),
        ValueCase(key: "0x50360002", number: nil, bool: nil, hex: "0xFFFFFFFFFFFFFFFF", bits: .max),
        ValueCase(key: "0x20910009", number: nil, bool: nil, hex: "0x100", bits: nil),
    ]

    @Test(arguments: values)
    func valuesAreCheckedAgainstTheirKeysType(_ c: ValueCase) throws {
        let key = try #require(UBXConfigKey.named(c.key))
        let got = try? UBXValset.bits(for: key, number: c.number, bool: c.bool, hex: c.hex).get()
        #expect(got == c.bits)
    }

    @Test func anItemIsWrittenForLogsWithItsSign() throws {
        #expect(try Self.item("CFG-NAVSPG-INFIL_MINELEV", -5).text == "CFG-NAVSPG-INFIL_MINELEV=-5")
        #expect(try Self.item("CFG-USBINPROT-RTCM3X", bool: true).text == "CFG-USBINPROT-RTCM3X=true")
    }
}
