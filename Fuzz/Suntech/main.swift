// Suntech reports over one connection, cut into reads by the input's first byte (ChunkPlan):
// CR-ended text (with `\r\n` inside serial data), zip and universal binary reports by their
// length, every layout (legacy, ST910, ST4xx, universal by map). The frame limit is the
// `suntech` source's default.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 2_048)
    TrackerHarness.stream("suntech", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        SuntechCodec(limits: limits)
    }
    return 0
}

FuzzDriver.run(testOneInput)
