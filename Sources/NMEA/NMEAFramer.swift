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

    /// Consumes bytes of `input` from `offset` until a line is complete.
    ///
    /// - Returns: true with `offset` just past the line's terminator when a line is ready for
    ///   ``withLine(_:)``; false with `offset == input.count` when the input ran out first.
    public mutating func next(in input: UnsafeRawBufferPointer, from offset: inout Int) -> Bool {
        if complete {
            line.removeAll(keepingCapacity: true)
            complete = false
        }
        var i = offset
        let n = input.count
        while i < n {
            switch state {
            case .idle(var lineStart):
                // Skip to the next sentence start, counting what is not whitespace as noise.
                while i < n {
                    let c = input[i]
                    if c == 0x24 || c == 0x21 { break }  // $ !
                    if c == 0x0A || c == 0x0D {
                        lineStart = true
                    } else if c == 0x20 || c == 0x09 {
                        // whitespace keeps lineStart as it is
                    } else if c == 0x23 && lineStart {  // #
                        break
                    } else {
                        counters.noiseBytes += 1
                        lineStart = false
                    }
                    i += 1
                }
                if i == n {
                    state = .idle(lineStart: lineStart)
                    break
                }
                if input[i] == 0x23 {
                    counters.comments += 1
                    state = .comment
                } else {
                    line.append(input[i])
                    state = .inLine
                }
                i += 1
            case .inLine:
                // Fast scan for a byte that ends or restarts the line.
                let start = i
                let room = maxLineLength - line.count
                var stop = -1
                while i < n {
                    let c = input[i]
                    if c == 0x0A || c == 0x0D || c == 0x24 || c == 0x21 { stop = Int(c); break }
                    i += 1
                }
                let taken = i - start
                if taken > room {
                    counters.tooLong += 1
                    line.removeAll(keepingCapacity: true)
                    state = .skippingLong
                    i = start + room
                    continue
                }
                if taken > 0 {
                    line.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<i]))
                }
                if stop < 0 { break }  // input ran out mid-line: carry it over
                i += 1
                if stop == 0x0A || stop == 0x0D {
                    state = .idle(lineStart: true)
                    complete = true
                    offset = i
                    return true
                }
                // `$` or `!` inside a line.
                if line.count == 1 && line[0] == 0x24 && stop == 0x24 {
                    continue  // `$$`: keep the single `$`
                }
                counters.truncated += 1
                line.removeAll(keepingCapacity: true)
                line.append(UInt8(stop))
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
        offset = n
        return false
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
