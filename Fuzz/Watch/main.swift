// Watch frames (`[3G*id*len*…]`) over one connection, cut into reads by the input's first byte
// (ChunkPlan): bracket balancing, `}01`…`}05` escapes, indexed headers, positions and answers.
// The frame limit is small (4 KiB, the source's is 32 KiB) so that the fuzzer reaches it.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 4_096)
    TrackerHarness.stream("watch", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        WatchCodec(limits: limits)
    }
    return 0
}

FuzzDriver.run(testOneInput)
