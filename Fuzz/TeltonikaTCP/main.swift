// Teltonika over TCP: an IMEI frame, then AVL frames, cut into reads by the input's first byte
// (ChunkPlan). The frame limit is the `teltonika` source's default.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 16_384)
    TrackerHarness.stream("teltonika tcp", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        TeltonikaCodec(transport: .tcp, limits: limits)
    }
    return 0
}

FuzzDriver.run(testOneInput)
