/// Splits a byte stream into NMEA lines, whatever the line endings, noise and read boundaries.
///
/// Push bytes with ``next(in:from:)``: it consumes input until one line is complete and returns
/// true; read the line with ``withLine(_:)`` before the next call. At end of input call
/// ``finish()`` once to frame a last line that has no line ending.
///
/// Rules, all byte-level so a read may end anywhere:
/// - A line starts at `$` or `!` and ends at CR or LF (so CRLF, LF, CR and mixed endings work).
/// - `$$` counts as one `$` (some multiplexers double it).
/// - A `$` or `!` inside a line starts a new line there; the cut one is counted `truncated`
///   (two writers on one serial line).
/// - `#` at the start of a line makes a comment that runs to the end of the line.
/// - Other bytes outside a line (NULs, binary noise, garbage text) are counted as noise.
/// - A line longer than `maxLineLength` is counted `tooLong` and skipped to its end; the
///   carry buffer never grows beyond `maxLineLength`.
public struct NMEAFramer: Sendable {
    /// Counters kept by the framer.
    public struct Counters: Sendable, Equatable {
        public var tooLong = 0
        public var truncated = 0
        public var noiseBytes = 0
        public var comments = 0
    }

    private enum State: Sendable {
        /// Between lines; `lineStart` is true when only whitespace was seen since the last line end.
        case idle(lineStart: Bool)
        case inLine
        case comment
        case skippingLong
    }

    private var state: State = .idle(lineStart: true)
    private var line: [UInt8] = []
    private var complete = false
    /// The longest line kept, from `$` to the end of the checksum.
    public let maxLineLength: Int
    /// What the framer skipped so far.
    public private(set) var counters = Counters()

    /// Creates a framer that keeps lines of up to `maxLineLength` bytes.
    public init(maxLineLength: Int = 256) {
        self.maxLineLength = max(8, maxLineLength)
        line.reserveCapacity(self.maxLineLength)
    }

    /// Where a framed line is: inside the input just passed, or in the framer's carry buffer.
    enum Framed {
        /// The line is `input[range]`: it started and ended in this input, so it was not copied.
        case input(Range<Int>)
        /// The line spans reads: read it with ``withLine(_:)``.
        case carried
    }

    /// Consumes bytes of `input` from `offset` until a line is complete.
    ///
    /// - Returns: true with `offset` just past the line's terminator when a line is ready for
    ///   ``withLine(_:)``; false with `offset == input.count` when the input ran out first.
    public mutating func next(in input: UnsafeRawBufferPointer, from offset: inout Int) -> Bool {
        switch nextLine(in: input, from: &offset) {
        case nil: return false
        case .carried?: return true
        case .input(let r)?:
            line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[r]))
            return true
        }
    }

    /// Like ``next(in:from:)``, but a line wholly inside `input` is returned as its range there
    /// instead of being copied: the decoder's fast path.
    mutating func nextLine(in input: UnsafeRawBufferPointer, from offset: inout Int) -> Framed? {
        if complete {
            // Most lines were never copied: only a carried one needs clearing.
            if !line.isEmpty { line.removeAll(keepingCapacity: true) }
            complete = false
        }
        // Start of the current line in `input` while it has not been copied to `line` (-1: none).
        var lineStart = -1
        var i = offset
        let n = input.count
        while i < n {
            switch state {
            case .idle(var atLineStart):
                // Skip to the next sentence start, counting what is not whitespace as noise.
                while i < n {
                    let c = input[i]
                    if c == 0x24 || c == 0x21 { break }  // $ !
                    if c == 0x0A || c == 0x0D {
                        atLineStart = true
                    } else if c == 0x20 || c == 0x09 {
                        // whitespace keeps atLineStart as it is
                    } else if c == 0x23 && atLineStart {  // #
                        break
                    } else {
                        counters.noiseBytes += 1
                        atLineStart = false
                    }
                    i += 1
                }
                if i == n {
                    state = .idle(lineStart: atLineStart)
                    break
                }
                if input[i] == 0x23 {
                    counters.comments += 1
                    state = .comment
                } else {
                    lineStart = i
                    state = .inLine
                }
                i += 1
            case .inLine:
                // Fast scan for a byte that ends or restarts the line.
                let start = i
                // Bytes of this line already held: copied earlier, or from `lineStart` on in this input.
                let held = lineStart >= 0 ? start - lineStart : line.count
                let room = maxLineLength - held
                var stop = -1
                i = Self.skipToLineByte(input, from: i)
                while i < n {
                    let c = input[i]
                    if c == 0x0A || c == 0x0D || c == 0x24 || c == 0x21 { stop = Int(c); break }
                    i += 1
                }
                let taken = i - start
                if taken > room {
                    counters.tooLong += 1
                    line.removeAll(keepingCapacity: true)
                    lineStart = -1
                    state = .skippingLong
                    i = start + room
                    continue
                }
                if stop < 0 {
                    // Input ran out mid-line: carry it over (a line still in `input` is copied below).
                    if lineStart < 0 && taken > 0 {
                        line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<i]))
                    }
                    break
                }
                i += 1
                if stop == 0x0A || stop == 0x0D {
                    state = .idle(lineStart: true)
                    complete = true
                    offset = i
                    if lineStart >= 0 { return .input(lineStart..<(i - 1)) }
                    if taken > 0 {
                        line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<(i - 1)]))
                    }
                    return .carried
                }
                // `$` or `!` inside a line.
                let heldNow = held + taken
                let firstByte = lineStart >= 0 ? input[lineStart] : (line.isEmpty ? 0 : line[0])
                if heldNow == 1 && firstByte == 0x24 && stop == 0x24 {
                    // `$$`: keep the single `$` (the second one, when the line is still in `input`).
                    if lineStart >= 0 { lineStart = i - 1 }
                    continue
                }
                counters.truncated += 1
                line.removeAll(keepingCapacity: true)
                // The new line starts at the `$`/`!` just passed, in this input.
                lineStart = i - 1
            case .comment, .skippingLong:
                let skippingLong: Bool
                if case .skippingLong = state { skippingLong = true } else { skippingLong = false }
                while i < n {
                    let c = input[i]
                    if c == 0x0A || c == 0x0D { break }
                    // In an over-long line a new sentence may start; a comment is taken whole.
                    if skippingLong && (c == 0x24 || c == 0x21) { break }
                    i += 1
                }
                if i == n { break }
                if input[i] == 0x0A || input[i] == 0x0D {
                    state = .idle(lineStart: true)
                    i += 1
                } else {
                    state = .idle(lineStart: false)
                }
            }
        }
        // A line that started in this input and is still open (possibly just its `$`) is carried over.
        if lineStart >= 0 {
            line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[lineStart..<n]))
        }
        offset = n
        return nil
    }

    /// Skips whole 8-byte words that hold no CR, LF, `$` or `!`: the index of the first word
    /// that may hold one (checked byte by byte by the caller), or near the end of `input`.
    @inline(__always)
    private static func skipToLineByte(_ input: UnsafeRawBufferPointer, from start: Int) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasByte(_ w: UInt64, _ b: UInt64) -> UInt64 {
            let x = w ^ (ones &* b)
            return (x &- ones) & ~x & highs  // never misses a zero byte
        }
        var i = start
        while i + 8 <= input.count {
            let w = UInt64(littleEndian: input.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            if hasByte(w, 0x0A) | hasByte(w, 0x0D) | hasByte(w, 0x24) | hasByte(w, 0x21) != 0 { break }
            i += 8
        }
        return i
    }

    /// The decoder's fast path, tried before ``nextLine(in:from:)``: between lines, past the
    /// last line's ending, a whole clean line in `input`, with `offset` moved past its ending.
    /// A clean line is `$body*HH` with every body byte printable ASCII other than `!`, `$` and
    /// `*` (so the decoder's byte checks are done) and `HH` hex digits; `body` is its range
    /// between `$` and `*`, `xor` the XOR of the body and `declared` the value of `HH`. It is
    /// the line the general path would frame. Anything else (noise, a comment, `$$`, a cut or
    /// over-long line, a line running past this input) is nil, with `offset` and the framer
    /// unchanged, for the general path.
    @inline(__always)
    mutating func nextClean(in input: UnsafeRawBufferPointer, from offset: inout Int)
        -> (body: Range<Int>, xor: UInt8, declared: UInt8)? {
        guard case .idle = state else { return nil }
        let n = input.count
        var j = offset
        while j < n && (input[j] == 0x0A || input[j] == 0x0D) { j += 1 }
        guard j < n && input[j] == 0x24, let line = Self.cleanLine(in: input, dollar: j, maxLength: maxLineLength)
        else { return nil }
        state = .idle(lineStart: true)
        offset = line.body.upperBound + 4
        return line
    }

    /// The clean line (see ``nextClean(in:from:)``) starting at the `$` at `dollar` and ending
    /// with CR or LF in `input`, or nil when the line is anything else.
    ///
    /// Eight bytes at a time, one test per word: a byte below `+` (0x2B: controls, CR, LF,
    /// space, `!`, `$`, `*` and a few punctuation marks) or above `~` stops the scan, and the
    /// first stop must be the `*` before `HH` and the line ending. The bit tests may flag bytes
    /// after the first real stop but never before it, so the lowest flag is exact.
    @inline(__always)
    private static func cleanLine(in input: UnsafeRawBufferPointer, dollar: Int, maxLength: Int)
        -> (body: Range<Int>, xor: UInt8, declared: UInt8)? {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let n = input.count
        var x: UInt64 = 0
        var i = dollar + 1
        // Words that fit in `input`, and no further than a line may be long.
        let last = min(n - 8, dollar + maxLength)
        while i <= last {
            let w = UInt64(littleEndian: input.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let stops = ((w &- ones &* 0x2B) & ~w | (w &+ ones) | w) & highs
            if stops == 0 {
                x ^= w
                i += 8
                continue
            }
            let k = stops.trailingZeroBitCount >> 3
            x ^= w & ((1 &<< UInt64(k &* 8)) &- 1)
            let star = i + k
            guard star > dollar + 1, star + 3 < n, star + 3 - dollar <= maxLength, input[star] == 0x2A,
                  let hi = NMEAChecksum.hexValue(input[star + 1]), let lo = NMEAChecksum.hexValue(input[star + 2]),
                  input[star + 3] == 0x0D || input[star + 3] == 0x0A
            else { return nil }
            x ^= x >> 32
            x ^= x >> 16
            x ^= x >> 8
            return ((dollar + 1)..<star, UInt8(truncatingIfNeeded: x), hi << 4 | lo)
        }
        return nil
    }

    /// Ends the input: frames a last line that had no line ending.
    ///
    /// - Returns: true when a line is ready for ``withLine(_:)``.
    public mutating func finish() -> Bool {
        if complete {
            line.removeAll(keepingCapacity: true)
            complete = false
        }
        defer { state = .idle(lineStart: true) }
        if case .inLine = state, !line.isEmpty {
            complete = true
            return true
        }
        return false
    }

    /// Calls `body` with the line just framed: from `$` or `!` up to, not including, its ending.
    public func withLine<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try line.withUnsafeBytes { try body($0) }
    }
}
