// What an NTRIP caster sends, as the client reads it: the answer's head (ICY / SOURCETABLE /
// HTTP status and headers), then the body — chunked or not — cut into RTCM 3 frames, or read
// as a sourcetable.
//
// Input: [plan][bytes]. The plan byte cuts the bytes into reads (ChunkPlan); the head is read
// as the client reads it (NTRIPResponseHead.Reader, one feed per read).
//
// Checks: the reader agrees with a parse of everything received; the head is found at the same place whatever the split (it never needs bytes past
// its blank line, and never changes its mind once found); the chunked decoder gives the same
// body (or the same error) whatever the split; the RTCM frames of the body are the same
// whatever the split and each checks whole; a sourcetable body parses (no trap, and every
// stream has a mountpoint field).
import FuzzSupport
import NTRIP
import RTCM

struct Outcome: Equatable {
    var head: NTRIPResponseHead?
    var headLength = 0
    var headError = false
    var body: [UInt8] = []
    var chunkError: HTTPChunkedDecoder.Failure?
    var frames: [[UInt8]] = []
}

func read(_ stream: [UInt8], reads: [Range<Int>]) -> Outcome {
    var out = Outcome()
    var reader = NTRIPResponseHead.Reader()
    var chunked: HTTPChunkedDecoder?
    var framer = RTCMStreamFramer()
    func body(_ bytes: UnsafeRawBufferPointer) {
        out.body += bytes
        framer.feed(bytes) { out.frames.append(Array($0)) }
    }
    for r in reads {
        let piece = Array(stream[r])
        if out.head == nil && !out.headError {
            do {
                guard let (h, length) = try reader.feed(piece[...]) else { continue }
                out.head = h
                out.headLength = length
                if h.chunked { chunked = HTTPChunkedDecoder() }
                let rest = Array(reader.received[length...])
                if chunked != nil {
                    do { try rest.withUnsafeBytes { raw in try chunked?.feed(raw, body: body) } } catch { out.chunkError = error as? HTTPChunkedDecoder.Failure; chunked = nil }
                } else {
                    rest.withUnsafeBytes(body)
                }
            } catch {
                out.headError = true
            }
            continue
        }
        guard out.head != nil, out.chunkError == nil else { continue }
        if chunked != nil {
            do { try piece.withUnsafeBytes { raw in try chunked?.feed(raw, body: body) } } catch { out.chunkError = error as? HTTPChunkedDecoder.Failure; chunked = nil }
        } else {
            piece.withUnsafeBytes(body)
        }
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let (plan, rest) = ChunkPlan.split(fuzzInput(data, size))
    let stream = Array(rest)
    let chunked = read(stream, reads: plan.ranges(count: stream.count))
    if let head = chunked.head {
        // What the reader found is what a parse of the same bytes finds.
        let parsed = try? NTRIPResponseHead.parse(Array(stream.prefix(chunked.headLength)), atEnd: true)
        fuzzCheck(parsed?.head == head || head.statusLine.hasPrefix("ICY"), "ntrip: the reader's head \(head) is not the parse's \(String(describing: parsed))")
    }
    for f in chunked.frames {
        f.withUnsafeBytes { fuzzCheck(RTCMFrame.check($0) == .frame(length: f.count), "ntrip: a frame handed out does not check") }
    }
    if chunked.head?.kind == .sourcetable {
        let table = NTRIPSourcetable(text: String(decoding: chunked.body, as: UTF8.self))
        _ = table.stream("MOUNT")
    }
    if plan.control & 3 != 0 {
        let whole = read(stream, reads: stream.isEmpty ? [] : [0..<stream.count])
        // A head after ICY with nothing behind it yet is data at once: only then may a split
        // read see the head end earlier than one read does (the later bytes then go to the body).
        if whole.head?.kind == .data && whole.head?.statusLine.hasPrefix("ICY") == true && chunked.headLength != whole.headLength {
            return 0
        }
        fuzzCheck(chunked.head == whole.head && chunked.headLength == whole.headLength && chunked.headError == whole.headError,
                  "ntrip: plan \(plan.control) read the head as \(String(describing: chunked.head)) at \(chunked.headLength), one read as \(String(describing: whole.head)) at \(whole.headLength)")
        fuzzCheck(chunked.chunkError == whole.chunkError, "ntrip: plan \(plan.control) chunk error \(String(describing: chunked.chunkError)), one read \(String(describing: whole.chunkError))")
        if whole.chunkError == nil {
            fuzzCheck(chunked.body == whole.body, "ntrip: plan \(plan.control) gave another body")
            fuzzCheck(chunked.frames == whole.frames, "ntrip: plan \(plan.control) gave other frames")
        }
    }
    return 0
}

FuzzDriver.run(testOneInput)
