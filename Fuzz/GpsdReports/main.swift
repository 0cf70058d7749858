// What the `gpsd` source does with the daemon's output: lines (64 KiB cap), each parsed as a
// report (TPV, SKY, anything else), TPVs and SKYs merged into one position per device and
// epoch. Input: [plan][bytes], the plan byte cutting the bytes into reads (ChunkPlan); after
// each read a second passes on the merger's clock, so idle epochs are flushed as in a real run.
import FuzzSupport
import GatewayCore
import GpsdInput

/// The merger's clock starts here; the input moves it, never the wall clock.
let start = MonotonicInstant(sinceOrigin: .zero)

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let (plan, stream) = ChunkPlan.split(fuzzInput(data, size))
    var framer = GpsdLineFramer()
    var merger = GpsdEpochMerger(source: "gpsd", defaultDevice: "/dev/fuzz")
    var positions: [Position] = []
    for (index, read) in plan.ranges(count: stream.count).enumerated() {
        let now = start + .seconds(index)
        framer.feed(UnsafeRawBufferPointer(rebasing: stream[read])) { line in
            do throws(GpsdReportError) {
                switch try GpsdReportParser.parse(line) {
                case .tpv(let tpv): merger.add(tpv, now: now, into: &positions)
                case .sky(let sky): merger.add(sky)
                case .other: break
                }
            } catch {
                _ = error.description
            }
        }
        merger.flushIdle(now: now, idle: .milliseconds(500), into: &positions)
    }
    merger.flushAll(into: &positions)
    PositionChecks.check(positions, "gpsd")
    return 0
}

FuzzDriver.run(testOneInput)
