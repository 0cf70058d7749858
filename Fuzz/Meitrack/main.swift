// Meitrack frames over one connection, cut into reads by the input's first byte (ChunkPlan):
// `$$` resynchronisation, the length field (and a text frame ending before it), checksums,
// AAA/AFF reports, CCC and CCE binary cache batches, answers. The frame limit is the
// `meitrack` source's default.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 4_096)
    TrackerHarness.stream("meitrack", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        MeitrackCodec(limits: limits)
    }
    return 0
}

FuzzDriver.run(testOneInput)
