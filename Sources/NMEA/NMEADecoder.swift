import GatewayCore

/// Turns NMEA 0183 bytes into one ``Position`` per receiver epoch: the engine of every NMEA source.
///
/// Feed it reads of any size with ``decode(_:into:)``; call ``flush(into:)`` at end of input or
/// when the device went quiet, so the last epoch is not held back. Bad input is counted in
/// ``statistics`` and skipped, never thrown.
public struct NMEADecoder: Sendable {
    private var framer: NMEAFramer
    private var assembler: EpochAssembler
    private var counts = NMEAStatistics()
    private let requireChecksum: Bool

    /// Creates a decoder with the given options.
    public init(options: NMEAOptions) {
        framer = NMEAFramer(maxLineLength: options.maxSentenceLength)
        assembler = EpochAssembler(options: options)
        requireChecksum = options.requireChecksum
    }

    /// Decodes one read, appending the positions of the epochs it completed to `out`.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer, into out: inout [Position]) {
        counts.bytes += bytes.count
        var offset = 0
        while framer.next(in: bytes, from: &offset) {
            handleLine(into: &out)
        }
    }

    /// Ends the input (or marks the device idle): frames an unterminated last line and emits the pending epoch.
    public mutating func flush(into out: inout [Position]) {
        if framer.finish() {
            handleLine(into: &out)
        }
        assembler.flush(into: &out)
    }

    /// What was decoded and skipped so far.
    public var statistics: NMEAStatistics {
        var s = counts
        let f = framer.counters
        s.tooLong = f.tooLong
        s.truncated = f.truncated
        s.noiseBytes = f.noiseBytes
        s.comments = f.comments
        s.epochs = assembler.emitted
        return s
    }

    private mutating func handleLine(into out: inout [Position]) {
        let outcome = framer.withLine { Self.check($0, requireChecksum: requireChecksum) }
        switch outcome {
        case .ais: counts.ais += 1
        case .badChecksum: counts.badChecksum += 1
        case .missingChecksum: counts.missingChecksum += 1
        case .invalidCharacter: counts.invalidCharacter += 1
        case .unknown: counts.unknown += 1
        case .proprietary: counts.proprietary += 1
        case .badField: counts.badField += 1
        case .sentence(let s):
            counts.accepted += 1
            assembler.add(s, into: &out)
        }
    }

    private enum LineOutcome {
        case ais, badChecksum, missingChecksum, invalidCharacter, unknown, proprietary, badField
        case sentence(NMEASentence)
    }

    /// Verifies a framed line (from `$`/`!`, without its ending) and parses its body.
    private static func check(_ line: UnsafeRawBufferPointer, requireChecksum: Bool) -> LineOutcome {
        guard let first = line.first else { return .unknown }
        if first == 0x21 { return .ais }
        var end = line.count
        while end > 1 && (line[end - 1] == 0x20 || line[end - 1] == 0x09) { end -= 1 }
        var bodyEnd = end
        if end >= 4 && line[end - 3] == 0x2A {  // `*HH`
            guard let hi = NMEAChecksum.hexValue(line[end - 2]), let lo = NMEAChecksum.hexValue(line[end - 1])
            else { return .badChecksum }
            bodyEnd = end - 3
            var sum: UInt8 = 0
            for i in 1..<bodyEnd { sum ^= line[i] }
            guard sum == hi << 4 | lo else { return .badChecksum }
        } else {
            var hasStar = false
            for i in 1..<end where line[i] == 0x2A { hasStar = true; break }
            if hasStar { return .badChecksum }  // a mangled `*HH`
            if requireChecksum { return .missingChecksum }
        }
        // `*` is reserved and anything outside printable ASCII means a damaged line.
        for i in 1..<bodyEnd {
            let c = line[i]
            guard c >= 0x20 && c <= 0x7E && c != 0x2A else { return .invalidCharacter }
        }
        guard bodyEnd > 1 else { return .unknown }
        switch SentenceParser.parse(body: UnsafeRawBufferPointer(rebasing: line[1..<bodyEnd])) {
        case .sentence(let s): return .sentence(s)
        case .unknown: return .unknown
        case .proprietary: return .proprietary
        case .badField: return .badField
        }
    }
}
