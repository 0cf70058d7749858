// The NMEA engine (framer, checks, parsers, epoch assembler) as every NMEA source drives it:
// reads of any size, then a flush at the end of the input.
//
// Input: [plan][options][bytes]. The plan byte cuts the bytes into reads (ChunkPlan); options
// bit 0 accepts sentences without a checksum, bit 1 caps lines at NMEA's 82 characters, bit 2
// sets a run token (live sources' ids for untimed fixes). The same bytes read whole must give
// the same positions, statistics and antenna reports: a decoder that depends on where the
// reads split loses or invents fixes on a real serial line.
import FuzzSupport
import GatewayCore
import NMEA

struct Decoded: Equatable {
    var positions: [Position] = []
    var statistics = NMEAStatistics()
    var antenna: [AntennaStatus] = []
}

func decode(_ stream: UnsafeRawBufferPointer, reads: [Range<Int>], options: NMEAOptions) -> Decoded {
    var decoder = NMEADecoder(options: options)
    var out = Decoded()
    for read in reads {
        decoder.decode(UnsafeRawBufferPointer(rebasing: stream[read]), into: &out.positions)
        out.antenna += decoder.takeAntennaReports()
    }
    decoder.flush(into: &out.positions)
    out.antenna += decoder.takeAntennaReports()
    out.statistics = decoder.statistics
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let (plan, rest) = ChunkPlan.split(fuzzInput(data, size))
    let flags = rest.first ?? 0
    let stream = rest.isEmpty ? rest : UnsafeRawBufferPointer(rebasing: rest[1...])
    var options = NMEAOptions()
    options.requireChecksum = flags & 1 == 0
    if flags & 2 != 0 { options.maxSentenceLength = 82 }
    if flags & 4 != 0 { options.untimedToken = "t0k" }
    options.source = "fuzz"
    options.device = "receiver"
    options.idPrefix = "fuzz-"

    let chunked = decode(stream, reads: plan.ranges(count: stream.count), options: options)
    fuzzCheck(chunked.statistics.bytes == stream.count, "nmea: counted \(chunked.statistics.bytes) of \(stream.count) bytes")
    fuzzCheck(chunked.statistics.epochs == chunked.positions.count, "nmea: \(chunked.statistics.epochs) epochs, \(chunked.positions.count) positions")
    _ = chunked.statistics.description
    PositionChecks.check(chunked.positions, "nmea")
    for position in chunked.positions { fuzzCheck(!position.id.isEmpty, "nmea: a position without an id") }
    if plan.control & 3 != 0 {
        let whole = decode(stream, reads: stream.isEmpty ? [] : [0..<stream.count], options: options)
        fuzzCheck(chunked.statistics == whole.statistics, "nmea: plan \(plan.control) counted \(chunked.statistics), one read \(whole.statistics)")
        fuzzCheck(chunked.positions == whole.positions, "nmea: plan \(plan.control) gave other positions than one read")
        fuzzCheck(chunked.antenna == whole.antenna, "nmea: plan \(plan.control) gave other antenna reports than one read")
    }
    return 0
}

FuzzDriver.run(testOneInput)
