import Foundation
import GatewayCore
import NMEA
import ReceiverStream
import Testing
import UBX

/// Inputs the UBX, RTCM and ReceiverStream fuzz targets (Fuzz/README.md) stopped on, each fed
/// as the decoder's caller feeds it, with what the decoder must now do.
@Suite struct FuzzRegressionTests {
    /// UBX `crash-f2cc610e`: a NAV-PVT with validDate and validTime set and the year 31073.
    /// The time in nanoseconds overflowed an Int64 and the process trapped; a year outside
    /// 1980–2099 now gives a position without a time.
    @Test func aNavPVTFromTheYear31073GivesNoTimeInsteadOfATrap() throws {
        let input = try #require(Data(base64Encoded: "ALBBcnJheQYKFRsy+////3UAAAAAAAAAAKiPkwLqBwMBDAAHBxsAAABYGwAAAwHgFAAAAAAAAAAAAAAAAAAAAADECQAAiBMAAABdBAIAAJhJAADdGwCrq6urq6urq6urq6urq6urq6urqwAaAAAA+////3UAAAAAAAAAAAAAXQQCAACYSWsAmAAAZUO6ACwAAAAAAABrAJgAAGVDugAsAAAAAAAAAAA="))
        // The target's selector byte (0: NAV-PVT), then the payload it frames.
        let frame = UBXFrame.encode(.navPVT, payload: Array(input.dropFirst()))
        let d = decodeStream(frame)
        #expect(d.positions.count == 1)
        #expect(d.positions.first?.time == nil)
        #expect(d.positions.first?.id.isEmpty == false)
    }

    /// UBX `crash-6148d9c4`: a 3D fix with gnssFixOK whose latitude reads 156.18°. It went out
    /// as a position off the Earth (no receiver sends one; a damaged frame whose 16-bit
    /// checksum still matches can); such a NAV-PVT now gives no coordinates and no fix.
    @Test func aNavPVTOffTheEarthGivesNoCoordinates() throws {
        let input = try #require(Data(base64Encoded: "AOBMrQzmBwoLCwQaNxcAAACEygAAA0PqEW8sEQkuVBddAAAAAAAAAABQAQAARAMAAAEAAAD//////v///wIAAAB0DC4BBAEAAICoEgHaAA4AXEFPIQAAAAAAAAAA"))
        let d = decodeStream(UBXFrame.encode(.navPVT, payload: Array(input.dropFirst())))
        #expect(d.positions.count == 1)
        #expect(d.positions.first?.hasCoordinates == false)
        #expect(d.positions.first?.mode == .noFix)
    }

    @Test(arguments: [(1979, false), (1980, true), (2099, true), (2100, false), (2262, false), (65535, false)])
    func aNavPVTTimeIsTakenOnlyFromTheYears1980To2099(year: Int, timed: Bool) {
        var payload = [UInt8](repeating: 0, count: 92)
        payload[4] = UInt8(year & 0xFF); payload[5] = UInt8(year >> 8)
        payload[6] = 12; payload[7] = 31; payload[8] = 23; payload[9] = 59; payload[10] = 59
        payload[11] = 0x03  // validDate, validTime
        payload[16] = 0xFF; payload[17] = 0xC9; payload[18] = 0x9A; payload[19] = 0x3B  // nano = 999_999_999
        let d = decodeStream(UBXFrame.encode(.navPVT, payload: payload))
        #expect(d.positions.count == 1)
        #expect((d.positions.first?.time != nil) == timed, "year \(year)")
    }

    /// ReceiverStream `crash-fd8c0727` (a 5-minute run; its input is
    /// `Fuzz/corpus/ReceiverStream/regression-fd8c0727…`): a u-blox stream with `TXT ANTSTATUS`
    /// sentences and MON-RF frames gave its antenna reports in another order when read in other
    /// pieces — text reports were put before the binary ones of the same read — so the last
    /// antenna state could be OK when the receiver last said OPEN. They now come in stream order.
    @Test func antennaReportsFromTextAndMonRFComeInStreamOrderWhateverTheReads() {
        func monRF(antenna: UInt8) -> [UInt8] {
            var block = [UInt8](repeating: 0, count: 24)
            block[1] = 1  // jamming ok
            block[2] = antenna
            block[3] = 1
            return UBXFrame.encode(.monRF, payload: [0, 1, 0, 0] + block)
        }
        let open = Array(NMEAChecksum.sentence(body: "GPTXT,01,01,02,ANTSTATUS=OPEN").utf8)
        let ok = Array(NMEAChecksum.sentence(body: "GPTXT,01,01,02,ANTSTATUS=OK").utf8)
        let stream = monRF(antenna: 2) + open + monRF(antenna: 2) + ok + monRF(antenna: 4)
        for chunks in [[], [1], [7], [40, 3], [stream.count - 10]] {
            let d = decodeStream(stream, chunks: chunks)
            #expect(d.antenna == [.ok, .open, .ok, .ok, .open], "reads of \(chunks)")
        }
    }
}
