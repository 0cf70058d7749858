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
    /// Field texts remembered from one sentence to the next (the time and coordinates an epoch repeats).
    private var memos = FieldReader.Memos()
    /// Antenna statuses seen since the last ``takeAntennaReports()``, oldest first.
    private var antennaReports: [AntennaStatus] = []

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
        while true {
            // Most lines are clean: framed, summed and parsed here; the general framer takes the
            // rest from the same offset.
            if let line = framer.nextClean(in: bytes, from: &offset) {
                if line.xor == line.declared {
                    handleBody(UnsafeRawBufferPointer(rebasing: bytes[line.body]), into: &out)
                } else {
                    counts.badChecksum += 1
                }
                continue
            }
            guard let framed = framer.nextLine(in: bytes, from: &offset) else { break }
            switch framed {
            case .input(let r): handleLine(UnsafeRawBufferPointer(rebasing: bytes[r]), into: &out)
            case .carried: handleCarriedLine(into: &out)
            }
        }
    }

    /// The device went quiet: emits the pending epoch, and keeps a partial line for the bytes
    /// still to come (a sentence split across a pause must not be cut in two).
    public mutating func flushIdle(into out: inout [Position]) {
        assembler.flush(into: &out)
    }

    /// Ends the input: frames an unterminated last line and emits the pending epoch.
    public mutating func flush(into out: inout [Position]) {
        if framer.finish() {
            handleCarriedLine(into: &out)
        }
        assembler.flush(into: &out)
    }

    /// Antenna statuses the receiver reported (u-blox `TXT ANTSTATUS=`, MediaTek `PGTOP,11`) since
    /// the last call, oldest first. The sentences still count as unknown / proprietary.
    public mutating func takeAntennaReports() -> [AntennaStatus] {
        guard !antennaReports.isEmpty else { return [] }
        defer { antennaReports.removeAll(keepingCapacity: true) }
        return antennaReports
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

    /// The framer's carried line (one that spanned reads), copied out first: handling it
    /// changes the decoder, which holds the framer.
    private mutating func handleCarriedLine(into out: inout [Position]) {
        let count = framer.withLine { $0.count }
        withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { copy in
            framer.withLine { copy.copyMemory(from: $0) }
            handleLine(UnsafeRawBufferPointer(copy), into: &out)
        }
    }

    /// Checks a framed line and parses its body, or counts why it has none.
    private mutating func handleLine(_ line: UnsafeRawBufferPointer, into out: inout [Position]) {
        switch Self.check(line, requireChecksum: requireChecksum) {
        case .body(let r): handleBody(UnsafeRawBufferPointer(rebasing: line[r]), into: &out)
        case .ais: counts.ais += 1
        case .badChecksum: counts.badChecksum += 1
        case .missingChecksum: counts.missingChecksum += 1
        case .invalidCharacter: counts.invalidCharacter += 1
        case .unknown: counts.unknown += 1
        }
    }

    /// Parses a checked, non-empty body and merges or counts what it is. The sentence goes
    /// straight to the assembler: wrapping it again on the way (it is the size of its largest
    /// kind) cost as much as a field.
    private mutating func handleBody(_ body: UnsafeRawBufferPointer, into out: inout [Position]) {
        switch SentenceParser.parse(body: body, memos: &memos) {
        case .sentence(let s):
            counts.accepted += 1
            assembler.add(s, into: &out)
        case .unknown:
            counts.unknown += 1
            if let status = AntennaSentence.status(body: body) { antennaReports.append(status) }
        case .proprietary:
            counts.proprietary += 1
            if let status = AntennaSentence.status(body: body) { antennaReports.append(status) }
        case .badField: counts.badField += 1
        }
    }

    /// What checking a framed line found: where its body is, or why it has none.
    private enum Checked {
        case body(Range<Int>)
        case ais, badChecksum, missingChecksum, invalidCharacter, unknown
    }

    /// `*` is reserved and anything outside printable ASCII means a damaged line.
    @inline(__always)
    private static func isBodyCharacter(_ c: UInt8) -> Bool {
        c >= 0x20 && c <= 0x7E && c != 0x2A
    }

    /// The XOR of `body` and whether it may hold a byte that ``isBodyCharacter(_:)`` rejects.
    ///
    /// Eight bytes at a time: this runs over every byte of input. The screen has no false
    /// negatives; a `true` is confirmed byte by byte by the caller.
    @inline(__always)
    private static func checksumAndScreen(_ body: UnsafeRawBufferPointer) -> (UInt8, Bool) {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var x: UInt64 = 0
        var flags: UInt64 = 0
        var i = 0
        let n = body.count
        while i + 8 <= n {
            let w = body.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            x ^= w
            // A byte < 0x20, a byte > 0x7E (or with the high bit set), a `*`: bit-twiddling
            // "has less / has more / has zero byte" tests, which never miss a matching byte.
            flags |= (w &- ones &* 0x20) & ~w
            flags |= (w &+ ones &* (127 - 0x7E)) | w
            let star = w ^ (ones &* 0x2A)
            flags |= (star &- ones) & ~star
            i += 8
        }
        x ^= x >> 32
        x ^= x >> 16
        x ^= x >> 8
        var sum = UInt8(truncatingIfNeeded: x)
        var suspect = flags & highs != 0
        while i < n {
            let c = body[i]
            sum ^= c
            if !isBodyCharacter(c) { suspect = true }
            i += 1
        }
        return (sum, suspect)
    }

    /// Verifies a framed line (from `$`/`!`, without its ending): where its body is, or why it
    /// has none.
    private static func check(_ line: UnsafeRawBufferPointer, requireChecksum: Bool) -> Checked {
        guard let first = line.first else { return .unknown }
        if first == 0x21 { return .ais }
        var end = line.count
        while end > 1 && (line[end - 1] == 0x20 || line[end - 1] == 0x09) { end -= 1 }
        var bodyEnd = end
        if end >= 4 && line[end - 3] == 0x2A {  // `*HH`
            guard let hi = NMEAChecksum.hexValue(line[end - 2]), let lo = NMEAChecksum.hexValue(line[end - 1])
            else { return .badChecksum }
            bodyEnd = end - 3
            let (sum, suspect) = Self.checksumAndScreen(UnsafeRawBufferPointer(rebasing: line[1..<bodyEnd]))
            guard sum == hi << 4 | lo else { return .badChecksum }
            if suspect {
                for i in 1..<bodyEnd where !Self.isBodyCharacter(line[i]) { return .invalidCharacter }
            }
        } else {
            var hasStar = false
            for i in 1..<end where line[i] == 0x2A { hasStar = true; break }
            if hasStar { return .badChecksum }  // a mangled `*HH`
            if requireChecksum { return .missingChecksum }
            for i in 1..<bodyEnd where !Self.isBodyCharacter(line[i]) { return .invalidCharacter }
        }
        guard bodyEnd > 1 else { return .unknown }
        return .body(1..<bodyEnd)
    }
}
