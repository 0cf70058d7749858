// H02 text and binary reports over one connection, cut into reads by the input's first byte
// (ChunkPlan). The frame limit is the `h02` source's default; positions are acknowledged, so
// the R12 answers are built too.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 1_024)
    TrackerHarness.stream("h02", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        H02Codec(limits: limits, acknowledgePositions: true)
    }
    return 0
}

FuzzDriver.run(testOneInput)
