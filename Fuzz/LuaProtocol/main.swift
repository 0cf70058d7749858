// A device protocol written in Lua (Examples/Lua/wialon-ips.lua) under LuaCodec, over one
// connection cut into reads by the input's first byte (ChunkPlan): the script's frame() and
// decode() on hostile bytes, what they return read back (messages, positions, answers), the
// sandbox's budget and memory limit. One script state serves every input, as one serves every
// connection of a source.
import Foundation
import FuzzSupport
import LuaRuntime
import TrackerProtocols

let script: LuaScript = {
    let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Examples/Lua/wialon-ips.lua").path
    do {
        return try LuaScript(path: path, limits: LuaState.Limits(instructions: 100_000, memoryBytes: 16 << 20), required: ["frame", "decode"])
    } catch {
        fatalError("\(error)")
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let limits = TrackerLimits(maxFrameBytes: 4_096)
    TrackerHarness.stream("lua", input: fuzzInput(data, size), maxFrameBytes: limits.maxFrameBytes) {
        LuaCodec(script: script, limits: limits, stats: nil)
    }
    return 0
}

FuzzDriver.run(testOneInput)
