// JT/T 808 frames over one connection, cut into reads by the input's first byte (ChunkPlan):
// 7E framing and escapes, check codes, 2013 and 2019 headers, split messages put together, every
// message type decoded. The frame limit is the `jt808` source's default; the split bound is
// small (4 KiB) so that the fuzzer reaches it. The harness also sends every answer through
// `outgoing` (numbering, escaping), answers every admission with every verdict, and lets the
// connection go quiet (0x8003 requests) and expire its split messages.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let options = JT808Codec.Options(limits: TrackerLimits(maxFrameBytes: 4_096), maxSplitBytes: 4_096, maxSplitMessages: 4)
    TrackerHarness.stream("jt808", input: fuzzInput(data, size), maxFrameBytes: options.limits.maxFrameBytes) {
        JT808Codec(options: options)
    }
    return 0
}

FuzzDriver.run(testOneInput)
