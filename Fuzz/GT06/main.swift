// GT06 frames (78 78 / 79 79) over one connection, cut into reads by the input's first byte
// (ChunkPlan). The frame limit is the `gt06` source's default; a device clock offset of +8 h
// (China time, as many of these trackers are set) takes the time-zone path.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 2_048)
    TrackerHarness.stream("gt06", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        GT06Codec(limits: limits, timeZoneOffsetSeconds: 8 * 3600)
    }
    return 0
}

FuzzDriver.run(testOneInput)
