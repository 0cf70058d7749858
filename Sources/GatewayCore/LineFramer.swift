/// Splits a byte stream into lines, with a hard cap on a line's length.
///
/// Shared by every source that reads text lines from a peer it does not trust (gpsd's JSON, an
/// exec plugin's stdout and stderr, a JSON Lines replay): a line longer than ``maxLineLength`` is
/// counted in ``tooLong`` and its bytes are dropped up to the next newline, so a peer that never
/// sends a newline cannot grow memory. Lines are handed over without the LF (a CR stays: callers
/// that care trim it).
public struct LineFramer: Sendable {
    public let maxLineLength: Int
    private var partial: [UInt8] = []
    /// Dropping the rest of an over-long line until its newline.
    private var skipping = false
    /// Lines dropped for being longer than ``maxLineLength``.
    public private(set) var tooLong = 0

    public init(maxLineLength: Int) {
        self.maxLineLength = maxLineLength
    }

    /// Bytes held for an unfinished line.
    public var pendingCount: Int { partial.count }

    /// Frames `bytes`, calling `line` for each complete line and `overlong` for each line dropped.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, line: (UnsafeRawBufferPointer) -> Void, overlong: () -> Void = {}) {
        var start = 0
        var i = 0
        while i < bytes.count {
            guard bytes[i] == 0x0A else { i += 1; continue }
            if skipping {
                skipping = false
            } else if partial.isEmpty {
                if i - start > maxLineLength { tooLong += 1; overlong() } else { line(UnsafeRawBufferPointer(rebasing: bytes[start..<i])) }
            } else if partial.count + (i - start) > maxLineLength {
                tooLong += 1
                overlong()
                partial.removeAll(keepingCapacity: false)
            } else {
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
                partial.withUnsafeBytes { line($0) }
                partial.removeAll(keepingCapacity: true)
            }
            i += 1
            start = i
        }
        guard start < bytes.count, !skipping else { return }
        if partial.count + (bytes.count - start) > maxLineLength {
            tooLong += 1
            overlong()
            skipping = true
            partial.removeAll(keepingCapacity: false)
        } else {
            partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<bytes.count]))
        }
    }

    /// The input ended: hands over an unterminated last line, if any, and starts afresh.
    public mutating func finish(line: (UnsafeRawBufferPointer) -> Void) {
        if !partial.isEmpty && !skipping { partial.withUnsafeBytes { line($0) } }
        reset()
    }

    /// Forgets a partial line (the connection ended).
    public mutating func reset() {
        partial.removeAll(keepingCapacity: partial.capacity <= 4096)
        skipping = false
    }
}
