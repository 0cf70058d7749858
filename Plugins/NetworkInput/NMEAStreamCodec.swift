import GatewayCore
import Locking
import NMEA
import TrackerProtocols

/// NMEA pushed by a device over a connection it opened, read as the listening sources read
/// tracker frames: an optional hello line that names the device, then sentences.
///
/// NMEA has no answers, so nothing waits for the commit but the connection's window; positions
/// leave without ids and are numbered by the listening source from their device and time.
struct NMEAStreamCodec: TrackerCodec {
    /// The longest hello line (the device's name), without its line ending.
    static let maxHelloBytes = 128

    private var decoder: NMEADecoder
    private var greeted: Bool
    private let counters: NMEACounters
    private var published = NMEAStatistics()
    private var positions: [Position] = []

    /// With `hello`, the first line is the device's name.
    init(hello: Bool, options: NMEAOptions, counters: NMEACounters) {
        decoder = NMEADecoder(options: options)
        greeted = !hello
        self.counters = counters
    }

    mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        if !greeted { return hello(bytes) }
        decoder.decode(bytes, into: &positions)
        publish()
        return .message(.records(TrackerRecords(positions: take(), answer: nil)), consumed: bytes.count)
    }

    mutating func flush(now: Timestamp) -> [Position] {
        decoder.flushIdle(into: &positions)
        publish()
        return take()
    }

    /// The hello line: printable text, its spaces trimmed.
    private mutating func hello(_ bytes: UnsafeRawBufferPointer) -> TrackerDecodeResult {
        guard let end = bytes.prefix(Self.maxHelloBytes + 2).firstIndex(of: UInt8(ascii: "\n")) else {
            if bytes.count > Self.maxHelloBytes + 1 {
                return .invalid(TrackerFrameError("too_large", "no hello line within \(Self.maxHelloBytes) bytes"), consumed: bytes.count, close: true)
            }
            return .needMore
        }
        var line = bytes[..<end]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        let name = String(decoding: line, as: UTF8.self).trimmingCharacters(in: " \t")
        guard !name.isEmpty, line.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
            return .invalid(TrackerFrameError("syntax", "the hello line must be a printable device name"), consumed: end + 1, close: true)
        }
        greeted = true
        return .message(.identification(deviceID: name, accepted: [], refused: nil), consumed: end + 1)
    }

    /// The positions decoded so far, their decoder-made ids taken off (the source numbers them
    /// by device, which the decoder does not know under its configured name).
    private mutating func take() -> [Position] {
        guard !positions.isEmpty else { return [] }
        for i in positions.indices { positions[i].id = "" }
        defer { positions.removeAll(keepingCapacity: true) }
        return positions
    }

    private mutating func publish() {
        let now = decoder.statistics
        counters.add(now.subtracting(published))
        published = now
    }
}

/// The `nmea.*` counters of every connection of one source, added up.
final class NMEACounters: Sendable {
    private let totals = Locked(NMEAStatistics())
    private let stats: ComponentStats

    init(stats: ComponentStats) { self.stats = stats }

    func add(_ delta: NMEAStatistics) {
        guard delta != NMEAStatistics() else { return }
        let now = totals.withLock { t -> NMEAStatistics in
            t = t.adding(delta)
            return t
        }
        now.publish(to: stats)
    }
}

extension String {
    /// The string without leading and trailing characters of `set`.
    func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        guard let start = firstIndex(where: { !chars.contains($0) }), let end = lastIndex(where: { !chars.contains($0) }) else { return "" }
        return String(self[start...end])
    }
}
