/// Finding frames in the byte streams of text protocols: a terminator within the frame limit,
/// line breaks between frames, and resynchronising on a start marker after garbage.
///
/// The text codecs share these so that each states only its own rule (`;`, `$`, `]`, `\r`).
enum TextFraming {
    /// Where a frame that starts at a given index ends.
    enum Scan: Equatable {
        /// The terminator is at `end`.
        case found(end: Int)
        /// No terminator yet, and the frame may still grow.
        case needMore
        /// No terminator within the frame limit.
        case tooLarge
    }

    /// The first index at or after `start` whose byte `isEnd` accepts, looking no further than
    /// `maxFrameBytes` bytes from `start`.
    static func find(_ bytes: UnsafeRawBufferPointer, from start: Int, maxFrameBytes: Int, isEnd: (UInt8) -> Bool) -> Scan {
        let limit = min(bytes.count, start + max(1, maxFrameBytes))
        var index = start
        while index < limit {
            if isEnd(bytes[index]) { return .found(end: index) }
            index += 1
        }
        return bytes.count - start >= maxFrameBytes ? .tooLarge : .needMore
    }

    static let cr: UInt8 = 0x0D, lf: UInt8 = 0x0A

    /// Line breaks (and NULs some devices pad with) between frames belong to no frame: they are
    /// taken with the frame that follows, so it does not matter whether they arrive with the
    /// previous frame or the next. Returns where the frame starts, or the result when the
    /// buffer holds nothing else (more than a line break of them is counted and dropped).
    static func skipBreaks(_ bytes: UnsafeRawBufferPointer) -> (start: Int, result: TrackerDecodeResult?) {
        var start = 0
        while start < bytes.count, bytes[start] == cr || bytes[start] == lf || bytes[start] == 0 { start += 1 }
        guard start < bytes.count else {
            return (start, start > 2
                ? .invalid(TrackerFrameError("syntax", "line breaks without a frame"), consumed: start, close: false)
                : .needMore)
        }
        return (start, nil)
    }

    /// Skips to the next byte at or after `index` that can start a frame (`isStart`): garbage,
    /// or a frame that turned out bad, is dropped in one step.
    static func skip(_ bytes: UnsafeRawBufferPointer, from index: Int, _ error: TrackerFrameError,
                     isStart: (UInt8) -> Bool) -> TrackerDecodeResult {
        var next = max(1, index)
        while next < bytes.count, !isStart(bytes[next]) { next += 1 }
        return .invalid(error, consumed: min(next, bytes.count), close: false)
    }

    /// Skips to the next two-byte start marker (`$$`) at or after `index`, keeping a last byte
    /// that may begin one.
    static func skip(_ bytes: UnsafeRawBufferPointer, from index: Int, _ error: TrackerFrameError, marker: (UInt8, UInt8)) -> TrackerDecodeResult {
        var next = max(1, index)
        while next + 1 < bytes.count {
            if bytes[next] == marker.0, bytes[next + 1] == marker.1 { return .invalid(error, consumed: next, close: false) }
            next += 1
        }
        let keep = bytes.count > 1 && bytes[bytes.count - 1] == marker.0 ? 1 : 0
        return .invalid(error, consumed: max(1, bytes.count - keep), close: false)
    }

    /// The frame's body without a trailing CR (a sentence ended by `\r\n` at its `\n`).
    static func withoutCR(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Range<Int> {
        var end = range.upperBound
        while end > range.lowerBound, bytes[end - 1] == cr { end -= 1 }
        return range.lowerBound..<end
    }

    /// Answers are ASCII text.
    static func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }
}
