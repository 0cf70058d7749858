// The receiver stream decoder (NMEA, UBX and RTCM 3 on one port) as the serial, file, tcp and
// exec sources drive it: reads of any size, then a flush at the end of the input.
//
// Input: [plan][options][bytes]. The plan byte cuts the bytes into reads (ChunkPlan); options
// bit 0 accepts sentences without a checksum, bit 1 sets a run token (live sources' ids for
// untimed fixes), bit 2 lowers the UBX payload limit to 100 bytes (so a false length is refused
// sooner and NAV-SAT/MON-HW are refused as too long).
//
// Checks: every byte counted; one position per epoch counted (statistics.epochs); every position
// has an id and passes PositionChecks; and the same bytes read whole give the same positions,
// statistics, antenna, jamming/spoofing reports and acknowledgements — a decoder whose frames
// depend on where the reads split loses fixes or invents them on a real serial line.
import FuzzSupport
import GatewayCore
import NMEA
import ReceiverStream
import UBX

struct Decoded: Equatable {
    var positions: [Position] = []
    var statistics = NMEAStatistics()
    var antenna: [AntennaStatus] = []
    var reports: [ReceiverReport] = []
    var acknowledgements: [UBXAcknowledgement] = []
    var rtcmTypes: [Int: Int] = [:]
}

func decode(_ stream: UnsafeRawBufferPointer, reads: [Range<Int>], options: NMEAOptions, maxPayload: Int) -> Decoded {
    var decoder = ReceiverStreamDecoder(options: options, maxUBXPayload: maxPayload)
    var out = Decoded()
    func take() {
        out.antenna += decoder.takeAntennaReports()
        out.reports += decoder.takeReceiverReports()
        out.acknowledgements += decoder.takeAcknowledgements()
    }
    for read in reads {
        decoder.decode(UnsafeRawBufferPointer(rebasing: stream[read]), into: &out.positions)
        take()
    }
    decoder.flush(into: &out.positions)
    take()
    out.statistics = decoder.statistics
    out.rtcmTypes = decoder.rtcmTypes
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let (plan, rest) = ChunkPlan.split(fuzzInput(data, size))
    let flags = rest.first ?? 0
    let stream = rest.isEmpty ? rest : UnsafeRawBufferPointer(rebasing: rest[1...])
    var options = NMEAOptions()
    options.requireChecksum = flags & 1 == 0
    if flags & 2 != 0 { options.untimedToken = "t0k" }
    options.source = "fuzz"
    options.device = "receiver"
    options.idPrefix = "fuzz-"
    let maxPayload = flags & 4 != 0 ? 100 : ReceiverStreamDecoder.defaultMaxUBXPayload

    let chunked = decode(stream, reads: plan.ranges(count: stream.count), options: options, maxPayload: maxPayload)
    let s = chunked.statistics
    fuzzCheck(s.bytes == stream.count, "receiver stream: counted \(s.bytes) of \(stream.count) bytes")
    fuzzCheck(s.epochs == chunked.positions.count, "receiver stream: \(s.epochs) epochs, \(chunked.positions.count) positions")
    fuzzCheck(chunked.rtcmTypes.values.reduce(0, +) == s.rtcmFrames, "receiver stream: RTCM types \(chunked.rtcmTypes) for \(s.rtcmFrames) frames")
    _ = s.description
    PositionChecks.check(chunked.positions, "receiver stream")
    for position in chunked.positions { fuzzCheck(!position.id.isEmpty, "receiver stream: a position without an id") }
    if plan.control & 3 != 0 {
        let whole = decode(stream, reads: stream.isEmpty ? [] : [0..<stream.count], options: options, maxPayload: maxPayload)
        fuzzCheck(chunked.statistics == whole.statistics, "receiver stream: plan \(plan.control) counted \(chunked.statistics), one read \(whole.statistics)")
        fuzzCheck(chunked.positions == whole.positions, "receiver stream: plan \(plan.control) gave other positions than one read")
        fuzzCheck(chunked == whole, "receiver stream: plan \(plan.control) gave other reports than one read")
    }
    return 0
}

FuzzDriver.run(testOneInput)
