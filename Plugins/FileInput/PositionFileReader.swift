import GatewayCore
import NMEA
import PositionEncoding
import ReceiverStream

/// Reads the positions of an NMEA log, a JSON Lines file or a GPX track, one batch at a time.
///
/// The one reader of recorded files: the `file` source replays what it returns, and
/// `locgate map` draws it. Pull-based, so a caller decides what to do between batches (pace,
/// await backpressure, fold into a compact track) and memory stays bounded by one batch for
/// NMEA and JSON Lines. Bad input is counted in `context.stats` and skipped, never thrown;
/// only a file that cannot be opened or read throws. At the end of the input it logs one
/// summary line on `context.logger` (info).
public struct PositionFileReader {
    /// Positions in each batch of a GPX track (NMEA and JSON Lines batches are one 256 KiB read).
    static let gpxBatch = 4096

    /// The file's path.
    public let path: String
    /// The format the file is read as.
    public let format: FileReplayConfiguration.Format
    private let context: ComponentContext
    private let device: String?
    private let idPrefix: String
    private let pass: Int
    private var file: ChunkedFile
    private var state: State
    /// Positions in the last batch: the next one is reserved that big, so a batch of hundreds
    /// of positions is not moved through a dozen reallocations as it grows.
    private var lastBatchCount = 0

    private enum State {
        case nmea(ReceiverStreamDecoder)
        case jsonl(LineFramer, lineNumber: Int, bad: Int)
        case gpx(points: [GPXReader.Point]?, next: Int)
        case finished
    }

    /// Opens the file; throws ``FileReplayError`` when it cannot be opened or is a directory.
    ///
    /// - Parameters:
    ///   - configuration: `path`, `format`, `device` and `require_checksum` are used.
    ///   - context: positions get `context.id` as their source; counters and the summary line go to it.
    ///   - idPrefix: prepended to generated ids (a replay gives each pass its own).
    ///   - pass: JSON Lines ids written in the file get `-pass` appended after the first pass.
    public init(configuration: FileReplayConfiguration, context: ComponentContext, idPrefix: String, pass: Int = 0) throws {
        path = configuration.path
        format = configuration.format
        self.context = context
        device = configuration.device
        self.idPrefix = idPrefix
        self.pass = pass
        file = try ChunkedFile(path: configuration.path)
        switch configuration.format {
        case .nmea:
            var options = NMEAOptions()
            options.requireChecksum = configuration.requireChecksum
            options.source = context.id
            options.device = configuration.device
            options.idPrefix = idPrefix
            state = .nmea(ReceiverStreamDecoder(options: options))
        case .jsonl:
            state = .jsonl(LineFramer(maxLineLength: Self.maxJSONLine), lineNumber: 0, bad: 0)
        case .gpx:
            state = .gpx(points: nil, next: 0)
        }
    }

    /// The file's size in bytes when it was opened.
    public var size: Int { file.size }
    /// Bytes read so far.
    public var offset: Int { file.offset }

    /// The next batch of positions (possibly empty), or nil at the end of the input.
    public mutating func next() throws -> [Position]? {
        switch state {
        case .finished:
            return nil
        case .nmea(var decoder):
            state = .finished   // no copy of the decoder stays behind while it is mutated
            var positions: [Position] = []
            if let chunk = try file.read() {
                positions.reserveCapacity(lastBatchCount + lastBatchCount / 8)
                chunk.withUnsafeBytes { decoder.decode($0, into: &positions) }
                lastBatchCount = positions.count
                decoder.statistics.publish(to: context.stats)
                state = .nmea(decoder)
            } else {
                decoder.flush(into: &positions)
                finish()
                decoder.statistics.publish(to: context.stats)
                context.logger.info("\(path): \(decoder.statistics)")
            }
            return positions
        case .jsonl(var lines, var lineNumber, var bad):
            state = .finished
            var positions: [Position] = []
            if let chunk = try file.read() {
                chunk.withUnsafeBytes {
                    lines.feed($0, line: { handleJSONLine($0, lineNumber: &lineNumber, bad: &bad, into: &positions) }, overlong: {
                        lineNumber += 1
                        bad += 1
                        context.stats.count("jsonl.bad_lines")
                        context.logger.warning("\(path):\(lineNumber): skipped a line longer than \(Self.maxJSONLine) bytes")
                    })
                }
                state = .jsonl(lines, lineNumber: lineNumber, bad: bad)
            } else {
                lines.finish { handleJSONLine($0, lineNumber: &lineNumber, bad: &bad, into: &positions) }
                finish()
                context.logger.info("\(path): \(lineNumber) lines, \(bad) skipped")
            }
            return positions
        case .gpx(let loaded, let next):
            let points: [GPXReader.Point]
            if let loaded { points = loaded } else {
                // GPX is one XML document: it is parsed whole, then handed out in batches.
                var bytes: [UInt8] = []
                while let chunk = try file.read() { bytes.append(contentsOf: chunk) }
                let (read, skipped) = GPXReader.read(bytes)
                if skipped > 0 {
                    context.stats.count("gpx.bad_points", by: skipped)
                    context.logger.warning("\(path): skipped \(skipped) point(s) without valid lat/lon")
                }
                points = read
            }
            guard next < points.count else {
                state = .finished
                finish()
                context.logger.info("\(path): \(points.count) points")
                return nil
            }
            let end = min(points.count, next + Self.gpxBatch)
            var positions: [Position] = []
            positions.reserveCapacity(end - next)
            for i in next..<end {
                var p = GPXReader.position(points[i])
                p.source = context.id
                p.device = device
                p.id = "\(idPrefix)\(i + 1)"
                positions.append(p)
            }
            state = .gpx(points: points, next: end)
            return positions
        }
    }

    /// Closes the file early (the end of the input closes it too).
    public mutating func close() {
        finish()
    }

    // MARK: - JSON Lines

    /// An over-long line cannot be a position: the framer skips it to its newline.
    static let maxJSONLine = 1 << 20

    private func handleJSONLine(_ line: UnsafeRawBufferPointer, lineNumber: inout Int, bad: inout Int, into positions: inout [Position]) {
        lineNumber += 1
        let slice = line.last == 13 ? UnsafeRawBufferPointer(rebasing: line.dropLast()) : line
        guard slice.contains(where: { $0 != 32 && $0 != 9 }) else { return }
        do {
            let value = try JSONValue.parse(slice)
            let number = lineNumber
            var p = try PositionJSON.decode(value, source: context.id) { _ in "\(idPrefix)l\(number)" }
            // Ids written in the file repeat on every pass of a loop; the pass number keeps them unique.
            if pass > 0 && value["id"] != nil { p.id += "-\(pass)" }
            if let d = device { p.device = d }
            positions.append(p)
        } catch {
            bad += 1
            context.stats.count("jsonl.bad_lines")
            if bad <= 5 {
                // One line is parsed at a time: the parser's own "line 1" would number it twice.
                let reason = (error as? JSONParseError).map { "column \($0.column): \($0.message)" } ?? "\(error)"
                context.logger.warning("\(path):\(lineNumber): skipped: \(LogText.escaped(reason))")
            }
        }
    }

    private mutating func finish() {
        file.close()
    }
}
