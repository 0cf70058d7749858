// Teltonika over UDP: each read of the input's plan (ChunkPlan) is one datagram.
import FuzzSupport
import TrackerProtocols

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    TrackerHarness.datagrams("teltonika udp", input: fuzzInput(data, size),
                             codec: TeltonikaCodec(transport: .udp, limits: TrackerLimits(maxFrameBytes: 16_384)))
    return 0
}

FuzzDriver.run(testOneInput)
