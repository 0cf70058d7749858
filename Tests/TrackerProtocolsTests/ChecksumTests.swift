import Testing
import TrackerProtocols

@Suite struct ChecksumTests {
    static let check = Array("123456789".utf8)

    @Test func arcOfTheStandardCheckStringIsBB3D() {
        #expect(CRC16.arc(Self.check) == 0xBB3D)
    }

    @Test func x25OfTheStandardCheckStringIs906E() {
        #expect(CRC16.x25(Self.check) == 0x906E)
    }

    @Test func emptyInputGivesEachVariantsInitialValueAfterXorOut() {
        #expect(CRC16.arc([UInt8]()) == 0x0000)
        #expect(CRC16.x25([UInt8]()) == 0x0000)
    }

    @Test func tableDrivenMatchesBitwiseForEveryByteValue() {
        func bitwise(_ bytes: [UInt8], poly: UInt16, initial: UInt16, xorOut: UInt16) -> UInt16 {
            var crc = initial
            for byte in bytes {
                crc ^= UInt16(byte)
                for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ poly : crc >> 1 }
            }
            return crc ^ xorOut
        }
        let all = (0...255).map { UInt8($0) }
        for n in [1, 2, 17, 256] {
            let bytes = Array(all.prefix(n).reversed())
            #expect(CRC16.arc(bytes) == bitwise(bytes, poly: 0xA001, initial: 0, xorOut: 0))
            #expect(CRC16.x25(bytes) == bitwise(bytes, poly: 0x8408, initial: 0xFFFF, xorOut: 0xFFFF))
        }
    }

    @Test func teltonikaFrameCRCCoversCodecThroughN2() {
        // Teltonika's documented Codec 8 example: CRC 0x0000C7CF.
        let data = TrackerVectors.bytes(hex: "08010000016B40D8EA30010000000000000000000000000000000105021503010101425E0F01F10000601A014E0000000000000000010000C7CF")
        #expect(CRC16.arc(data.dropLast(4)) == 0xC7CF)
    }
}
