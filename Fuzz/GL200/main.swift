// Queclink @Track messages over one connection, cut into reads by the input's first byte
// (ChunkPlan): `$`-ended text, binary frames skipped by their length, GPS blocks found anywhere
// in a report. SACK is on, so every message's +SACK answer is built too. The frame limit is
// the `gl200` source's default.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 2_048)
    TrackerHarness.stream("gl200", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        GL200Codec(limits: limits, sack: true)
    }
    return 0
}

FuzzDriver.run(testOneInput)
