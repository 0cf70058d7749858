/// Splits gpsd's byte stream into lines, with a hard cap on a line's length.
///
/// gpsd ends reports with CRLF (raw NMEA with whatever the receiver sent). A line longer than
/// ``maxLineLength`` is counted in ``tooLong`` and its bytes are dropped up to the next newline,
/// so a peer that never sends a newline cannot grow memory.
struct GpsdLineFramer {
    let maxLineLength: Int
    private var partial: [UInt8] = []
    /// Dropping the rest of an over-long line until its newline.
    private var skipping = false
    private(set) var tooLong = 0

    init(maxLineLength: Int = 64 * 1024) {
        self.maxLineLength = maxLineLength
        partial.reserveCapacity(1024)
    }

    /// Frames `bytes`, calling `line` for each complete line (without CR/LF; empty lines skipped).
    mutating func feed(_ bytes: UnsafeRawBufferPointer, line: (UnsafeRawBufferPointer) -> Void) {
        var start = 0
        var i = 0
        while i < bytes.count {
            guard bytes[i] == 0x0A else { i += 1; continue }
            if skipping {
                skipping = false
            } else if partial.isEmpty {
                if i - start > maxLineLength { tooLong += 1 } else { deliver(UnsafeRawBufferPointer(rebasing: bytes[start..<i]), line) }
            } else if partial.count + (i - start) > maxLineLength {
                overflow()
                skipping = false
            } else {
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
                partial.withUnsafeBytes { deliver($0, line) }
                partial.removeAll(keepingCapacity: true)
            }
            i += 1
            start = i
        }
        guard start < bytes.count, !skipping else { return }
        if partial.count + (bytes.count - start) > maxLineLength {
            overflow()
        } else {
            partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<bytes.count]))
        }
    }

    /// Forgets a partial line (the connection ended).
    mutating func reset() {
        partial.removeAll(keepingCapacity: true)
        if partial.capacity > 4096 { partial = [] }
        skipping = false
    }

    /// Bytes held for an unfinished line.
    var pendingCount: Int { partial.count }

    private mutating func overflow() {
        tooLong += 1
        skipping = true
        partial.removeAll(keepingCapacity: false)
    }

    private func deliver(_ raw: UnsafeRawBufferPointer, _ line: (UnsafeRawBufferPointer) -> Void) {
        var end = raw.count
        while end > 0 && (raw[end - 1] == 0x0D || raw[end - 1] == 0x20) { end -= 1 }
        guard end > 0 else { return }
        line(UnsafeRawBufferPointer(rebasing: raw[0..<end]))
    }
}
