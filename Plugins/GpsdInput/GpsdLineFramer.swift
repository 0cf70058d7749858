import GatewayCore

/// gpsd's lines: the shared ``LineFramer`` with gpsd's 64 KB cap, lines trimmed of CR and
/// trailing spaces, empty lines skipped.
package struct GpsdLineFramer {
    private var framer: LineFramer

    package init(maxLineLength: Int = 64 * 1024) {
        framer = LineFramer(maxLineLength: maxLineLength)
    }

    var maxLineLength: Int { framer.maxLineLength }
    /// Lines dropped for being too long.
    var tooLong: Int { framer.tooLong }
    /// Bytes held for an unfinished line.
    var pendingCount: Int { framer.pendingCount }

    /// Frames `bytes`, calling `line` for each complete line (without CR/LF; empty lines skipped).
    package mutating func feed(_ bytes: UnsafeRawBufferPointer, line: (UnsafeRawBufferPointer) -> Void) {
        framer.feed(bytes) { raw in
            var end = raw.count
            while end > 0 && (raw[end - 1] == 0x0D || raw[end - 1] == 0x20) { end -= 1 }
            guard end > 0 else { return }
            line(UnsafeRawBufferPointer(rebasing: raw[0..<end]))
        }
    }

    /// Forgets a partial line (the connection ended).
    mutating func reset() { framer.reset() }
}
