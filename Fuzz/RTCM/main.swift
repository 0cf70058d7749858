// The RTCM 3 framer the NTRIP client cuts a caster's stream with (after any chunked transfer
// decoding): reads of any size, whole CRC-checked frames out.
//
// Input: [plan][options][bytes]. The plan byte cuts the stream into reads (ChunkPlan). Options
// bit 0 builds the stream from the bytes instead of taking them as they are: the bytes are
// pieces [length high (2 bits)][length low][payload], each framed with RTCMFrame.encode (a valid
// CRC, which random bytes almost never carry), one after another; bit 1 then puts a stray `D3`
// before each frame.
//
// Checks: every frame handed out checks whole; frames, junk and the bytes still held add up to
// the input; the same frames and counters whatever the split; and a stream built from frames
// gives exactly those frames, byte for byte and in order, with only the stray bytes as junk —
// what reaches the receiver's port must be the caster's frames and nothing else.
import FuzzSupport
import RTCM

struct Framed: Equatable {
    var frames: [[UInt8]] = []
    var counters = RTCMStreamFramer.Counters()
    var pending = 0
}

func frame(_ stream: [UInt8], reads: [Range<Int>]) -> Framed {
    var framer = RTCMStreamFramer()
    var out = Framed()
    stream.withUnsafeBytes { all in
        for read in reads {
            framer.feed(UnsafeRawBufferPointer(rebasing: all[read])) { out.frames.append(Array($0)) }
        }
    }
    out.counters = framer.counters
    out.pending = framer.pendingBytes
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let (plan, rest) = ChunkPlan.split(fuzzInput(data, size))
    let flags = rest.first ?? 0
    let bytes = rest.isEmpty ? [] : Array(rest[1...])
    var stream = bytes
    var built: [[UInt8]] = []
    if flags & 1 != 0 {
        stream = []
        var i = 0
        while i + 2 <= bytes.count {
            let length = min(Int(bytes[i] & 0x03) << 8 | Int(bytes[i + 1]), bytes.count - i - 2)
            let f = RTCMFrame.encode(payload: Array(bytes[(i + 2)..<(i + 2 + length)]))
            built.append(f)
            if flags & 2 != 0 { stream.append(RTCMFrame.preamble) }
            stream += f
            i += 2 + length
        }
    }

    let chunked = frame(stream, reads: plan.ranges(count: stream.count))
    let c = chunked.counters
    fuzzCheck(c.bytes == stream.count, "rtcm: counted \(c.bytes) of \(stream.count) bytes")
    fuzzCheck(c.frames == chunked.frames.count, "rtcm: \(c.frames) frames counted, \(chunked.frames.count) handed out")
    let framedBytes = chunked.frames.reduce(0) { $0 + $1.count }
    fuzzCheck(framedBytes + c.junkBytes + chunked.pending == stream.count,
              "rtcm: \(framedBytes) in frames + \(c.junkBytes) junk + \(chunked.pending) held ≠ \(stream.count)")
    fuzzCheck(chunked.pending <= RTCMFrame.maxPayload + RTCMFrame.overhead, "rtcm: \(chunked.pending) bytes held")
    for f in chunked.frames {
        f.withUnsafeBytes { fuzzCheck(RTCMFrame.check($0) == .frame(length: f.count), "rtcm: a frame handed out does not check") }
    }
    if flags & 1 != 0 {
        fuzzCheck(chunked.frames == built, "rtcm: \(built.count) frames built, \(chunked.frames.count) handed out, or other bytes")
        fuzzCheck(c.badCRC == 0 && chunked.pending == 0, "rtcm: built stream gave \(c), \(chunked.pending) held")
        fuzzCheck(c.junkBytes == (flags & 2 != 0 ? built.count : 0), "rtcm: \(c.junkBytes) junk bytes in a built stream")
    }
    if plan.control & 3 != 0 {
        let whole = frame(stream, reads: stream.isEmpty ? [] : [0..<stream.count])
        fuzzCheck(chunked == whole, "rtcm: plan \(plan.control) gave \(chunked.counters), one read \(whole.counters)")
    }
    return 0
}

FuzzDriver.run(testOneInput)
