// GPS103 (Coban TK103) sentences over one connection, cut into reads by the input's first byte
// (ChunkPlan): `;`, `*` and line-feed terminators, logins, heartbeats, F/L reports, the `*`
// layout, OBD. The frame limit is the `gps103` source's default.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 1_024)
    TrackerHarness.stream("gps103", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        GPS103Codec(limits: limits)
    }
    return 0
}

FuzzDriver.run(testOneInput)
