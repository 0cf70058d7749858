import GatewayCore
import NMEA
import RTCM
import UBX

/// Turns what a receiver sends — NMEA 0183 sentences with u-blox UBX and RTCM 3 frames between
/// them, in any mix — into one ``Position`` per epoch, receiver reports and acknowledgements.
///
/// Same calls as ``NMEADecoder`` (which it drives for the text): ``decode(_:into:)`` for each
/// read, ``flushIdle(into:)`` when the device goes quiet, ``flush(into:)`` at the end.
///
/// How the stream is split, byte-safe whatever the read boundaries:
/// - Text never has the high bit set, so a scan eight bytes at a time for a byte ≥ 0x80 finds
///   every binary frame candidate (`B5` for UBX, `D3` for RTCM 3); a stream of pure NMEA goes
///   to the NMEA decoder in one piece, as before. Binary payloads hold `$`, CR and LF: they are
///   cut out before the NMEA framer could see them.
/// - A candidate is checked whole (UBX Fletcher-8, RTCM CRC-24Q) before anything is taken
///   from it. One that fails is counted, and the scan resumes at the byte after its sync, so a
///   false header or a false length never swallows the frames after it; its bytes go to the
///   NMEA framer, which counts them as noise. A candidate that needs more bytes is held back
///   (with what follows it) until they arrive, then checked the same way.
/// - A UBX header stating more than `maxUBXPayload` bytes is a false sync at once.
///
/// One position per epoch: once the stream has carried a NAV-PVT, an NMEA epoch whose time is
/// within 15 ms of a NAV-PVT's is dropped (`superseded`): NAV-PVT carries what NMEA rounds or
/// hides (RTK float vs fixed, accuracies, nanosecond time). The NMEA epoch is then held until
/// its next epoch starts (an idle pause does not release it), so a NAV-PVT that follows its
/// epoch's sentences still replaces them. NMEA epochs that no NAV-PVT describes (NMEA at a
/// higher rate) pass.
public struct ReceiverStreamDecoder: Sendable {
    /// The longest UBX payload taken as a frame (NAV-SAT with 255 satellites is 3068 bytes).
    public static let defaultMaxUBXPayload = 8192
    /// NMEA and NAV-PVT times this close (ms) are the same epoch: NMEA gives 10 ms.
    static let epochTolerance: Int64 = 15

    private var nmea: NMEADecoder
    private let maxUBXPayload: Int
    /// A binary candidate waiting for bytes, and the total it needs.
    private var carry: [UInt8] = []
    private var needed = 0
    private var binary = NMEAStatistics()
    private var bytes = 0
    private let idPrefix: String
    private let untimedPrefix: String
    private let blank: Position
    private var lastTime: Int64 = .min
    private var repeats = 0
    private var untimed = 0
    private var positions = 0
    /// Times of the last NAV-PVT epochs, newest last.
    private var recentEpochs: [Int64] = []
    private var sawNavPVT = false
    private var scratch: [Position] = []
    private var antennaReports: [AntennaStatus] = []
    private var receiverReports: [ReceiverReport] = []
    private var acknowledgements: [UBXAcknowledgement] = []

    /// The correction age (s) the last NAV-PVT stated, nil when it used none.
    public private(set) var correctionAge: Int?
    /// Satellites seen and used, and the mean C/N0 (dBHz) of those used, from the last NAV-SAT.
    public private(set) var satellites: (seen: Int, used: Int, meanUsedCNo: Double?)?
    /// RTCM 3 frames seen on the receiver's own output, by message number (a base station's).
    public private(set) var rtcmTypes: [Int: Int] = [:]

    /// u-blox's PUBX,03 lists every satellite: hundreds of characters, more than an NMEA source's default.
    public static let minimumSentenceLength = 1024

    public init(options: NMEAOptions, maxUBXPayload: Int = ReceiverStreamDecoder.defaultMaxUBXPayload) {
        var options = options
        options.maxSentenceLength = max(options.maxSentenceLength, Self.minimumSentenceLength)
        nmea = NMEADecoder(options: options)
        self.maxUBXPayload = maxUBXPayload
        idPrefix = options.idPrefix
        untimedPrefix = options.untimedToken.map { "\(options.idPrefix)u\($0)-" } ?? "\(options.idPrefix)u"
        blank = Position(datum: .wgs84, source: options.source, device: options.device)
        carry.reserveCapacity(1024)
    }

    // MARK: - Feeding

    /// Decodes one read, appending the positions of the epochs it completed to `out`.
    public mutating func decode(_ input: UnsafeRawBufferPointer, into out: inout [Position]) {
        bytes += input.count
        guard !carry.isEmpty else { return scan(input, into: &out) }
        // Top up the held candidate with what it still needs, then check it again.
        var offset = 0
        while !carry.isEmpty && offset < input.count {
            let take = min(needed - carry.count, input.count - offset)
            carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset..<(offset + take)]))
            offset += take
            if carry.count < needed { return }
            let held = carry
            carry.removeAll(keepingCapacity: true)
            // A good frame is taken; a bad one is scanned again from the byte after its sync,
            // which may end in another candidate that the rest of this read then tops up.
            held.withUnsafeBytes { scan($0, into: &out) }
        }
        if offset < input.count { scan(UnsafeRawBufferPointer(rebasing: input[offset...]), into: &out) }
    }

    /// The device went quiet: releases the pending NMEA epoch unless a NAV-PVT may still replace
    /// it, and keeps a partial sentence or frame for the bytes still to come.
    public mutating func flushIdle(into out: inout [Position]) {
        guard !sawNavPVT else { return }
        nmea.flushIdle(into: &out)
        antennaReports += nmea.takeAntennaReports()
    }

    /// Ends the input: a frame still waiting for bytes is counted truncated and its bytes after
    /// the sync are scanned; the last sentence and epoch are emitted.
    public mutating func flush(into out: inout [Position]) {
        while !carry.isEmpty {
            binary.binaryTruncated += 1
            let held = carry
            carry.removeAll(keepingCapacity: true)
            held.withUnsafeBytes { scan(UnsafeRawBufferPointer(rebasing: $0[1...]), into: &out) }
        }
        if sawNavPVT {
            nmea.flush(into: &scratch)
            takeNMEA(into: &out)
        } else {
            nmea.flush(into: &out)
        }
        antennaReports += nmea.takeAntennaReports()
    }

    // MARK: - What the caller takes

    /// What was decoded and skipped so far, text and binary.
    public var statistics: NMEAStatistics {
        var s = nmea.statistics.adding(binary)
        s.bytes = bytes
        s.epochs = s.epochs - binary.superseded + positions
        return s
    }

    /// Antenna statuses reported since the last call (u-blox `TXT ANTSTATUS=`, MediaTek
    /// `PGTOP,11`, UBX MON-RF and MON-HW), oldest first.
    public mutating func takeAntennaReports() -> [AntennaStatus] {
        guard !antennaReports.isEmpty else { return [] }
        defer { antennaReports.removeAll(keepingCapacity: true) }
        return antennaReports
    }

    /// Jamming and spoofing states reported since the last call (UBX MON-RF, MON-HW, NAV-STATUS).
    public mutating func takeReceiverReports() -> [ReceiverReport] {
        guard !receiverReports.isEmpty else { return [] }
        defer { receiverReports.removeAll(keepingCapacity: true) }
        return receiverReports
    }

    /// Hands what the decoding since `wellFormedBefore` (``statistics``' `wellFormed` then) said
    /// of the receiver to `health`: data received when something well formed came, then the
    /// antenna states and the jamming and spoofing reports, in the order they came, as events
    /// into `events`. Without health they are taken and dropped, so they do not pile up. What
    /// every live source reading a receiver stream (serial, tcp, udp) does after each read.
    public mutating func reportHealth(to health: inout ReceiverHealth?, device: String, wellFormedBefore: Int,
                                      at now: Timestamp, into events: inout [Position]) {
        let antenna = takeAntennaReports(), reports = takeReceiverReports()
        guard health != nil else { return }
        if statistics.wellFormed > wellFormedBefore { health?.dataReceived(device: device, at: now, into: &events) }
        for status in antenna { health?.antenna(status, device: device, at: now, into: &events) }
        for report in reports { health?.report(report, device: device, at: now, into: &events) }
    }

    /// UBX ACK-ACK and ACK-NAK answers received since the last call, oldest first.
    public mutating func takeAcknowledgements() -> [UBXAcknowledgement] {
        guard !acknowledgements.isEmpty else { return [] }
        defer { acknowledgements.removeAll(keepingCapacity: true) }
        return acknowledgements
    }

    // MARK: - Splitting

    /// Splits bytes (with no candidate held) into NMEA runs and binary frames.
    private mutating func scan(_ input: UnsafeRawBufferPointer, into out: inout [Position]) {
        let n = input.count
        var text = 0
        var i = 0
        while true {
            i = Self.nextHighByte(input, from: i)
            guard i < n else { break }
            let b = input[i]
            guard b == UBXFrame.sync1 || b == RTCMFrame.preamble else { i += 1; continue }
            let rest = UnsafeRawBufferPointer(rebasing: input[i..<n])
            let length: Int
            if b == UBXFrame.sync1 {
                switch UBXFrame.check(rest, maxPayload: maxUBXPayload) {
                case .frame(let l): length = l
                case .incomplete(let total): return hold(input, text: text, from: i, needing: total, into: &out)
                case .notFrame(let reason):
                    if reason == .badChecksum { binary.ubxBadChecksum += 1 } else if reason == .tooLong { binary.ubxTooLong += 1 }
                    i += 1
                    continue
                }
            } else {
                switch RTCMFrame.check(rest) {
                case .frame(let l): length = l
                case .incomplete(let total): return hold(input, text: text, from: i, needing: total, into: &out)
                case .notFrame(let badCRC):
                    if badCRC { binary.rtcmBadCRC += 1 }
                    i += 1
                    continue
                }
            }
            feedText(UnsafeRawBufferPointer(rebasing: input[text..<i]), into: &out)
            let frame = UnsafeRawBufferPointer(rebasing: input[i..<(i + length)])
            if b == UBXFrame.sync1 { handleUBX(frame, into: &out) } else { handleRTCM(frame) }
            i += length
            text = i
        }
        feedText(UnsafeRawBufferPointer(rebasing: input[text..<n]), into: &out)
    }

    /// Gives the text before a candidate to NMEA and keeps the candidate and what follows it.
    private mutating func hold(_ input: UnsafeRawBufferPointer, text: Int, from i: Int, needing total: Int, into out: inout [Position]) {
        feedText(UnsafeRawBufferPointer(rebasing: input[text..<i]), into: &out)
        // The check said `total` bytes are needed and fewer are there: all of them are held.
        carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i...]))
        needed = total
    }

    /// The index of the first byte ≥ 0x80 at or after `start`, or `input.count`.
    @inline(__always)
    static func nextHighByte(_ input: UnsafeRawBufferPointer, from start: Int) -> Int {
        let n = input.count
        var i = start
        while i + 8 <= n {
            let w = input.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if w & 0x8080_8080_8080_8080 != 0 { break }
            i += 8
        }
        while i < n && input[i] < 0x80 { i += 1 }
        return i
    }

    private mutating func feedText(_ text: UnsafeRawBufferPointer, into out: inout [Position]) {
        guard !text.isEmpty else { return }
        if sawNavPVT {
            nmea.decode(text, into: &scratch)
            takeNMEA(into: &out)
        } else {
            nmea.decode(text, into: &out)
        }
        // In stream order with MON-RF's and MON-HW's: taken whenever text is decoded, not
        // appended at the end of a read, so `TXT ANTSTATUS=OPEN` then a MON-RF saying OK ends
        // OK whatever the read boundaries (found by Fuzz/ReceiverStream).
        antennaReports += nmea.takeAntennaReports()
    }

    /// Moves the NMEA epochs just completed to `out`, less those a NAV-PVT described.
    private mutating func takeNMEA(into out: inout [Position]) {
        guard !scratch.isEmpty else { return }
        for p in scratch {
            guard let t = p.time?.milliseconds,
                  !recentEpochs.contains(where: { abs($0 - t) <= Self.epochTolerance }) else {
                binary.superseded += 1
                continue
            }
            out.append(p)
        }
        scratch.removeAll(keepingCapacity: true)
    }

    // MARK: - Frames

    private mutating func handleRTCM(_ frame: UnsafeRawBufferPointer) {
        binary.rtcmFrames += 1
        rtcmTypes[RTCMFrame.messageType(frame), default: 0] += 1
    }

    private mutating func handleUBX(_ frame: UnsafeRawBufferPointer, into out: inout [Position]) {
        binary.ubxFrames += 1
        let id = UBXMessageID(frame[2], frame[3])
        let payload = UnsafeRawBufferPointer(rebasing: frame[6..<(frame.count - 2)])
        switch id {
        case .navPVT:
            guard let pvt = NavPVT(payload: payload) else { return }
            emit(pvt, into: &out)
        case .navStatus:
            if let s = NavStatus(payload: payload), let state = UBXHealth.spoofing(s.spoofDetState) {
                receiverReports.append(.spoofing(state))
            }
        case .navSat:
            if let s = NavSat(payload: payload) { satellites = s.summary }
        case .monRF:
            guard let rf = MonRF(payload: payload) else { return }
            if let a = Self.worst(rf.blocks.compactMap(\.antenna)) { antennaReports.append(a) }
            if let j = rf.blocks.compactMap({ $0.jammingState.flatMap(UBXHealth.jamming) }).max(by: Self.lessSevere) {
                receiverReports.append(.jamming(j))
            }
        case .monHW:
            guard let hw = MonHW(payload: payload) else { return }
            if let a = UBXHealth.antenna(hw.aStatus) { antennaReports.append(a) }
            if let j = UBXHealth.jamming(hw.jammingState) { receiverReports.append(.jamming(j)) }
        case .ackAck, .ackNak:
            if let a = UBXAcknowledgement(id: id, payload: payload) { acknowledgements.append(a) }
        default:
            break
        }
    }

    /// The position of a NAV-PVT, numbered like the NMEA epochs (source id and fix time).
    private mutating func emit(_ pvt: NavPVT, into out: inout [Position]) {
        // Filled in place in `out`: a position built aside and appended is copied once more.
        out.append(blank)
        let k = out.count - 1
        NavPVTPosition.fill(&out[k], from: pvt)
        correctionAge = pvt.diffSoln ? NavPVTPosition.correctionAge(code: pvt.lastCorrectionAge) : nil
        positions += 1
        if let t = out[k].time?.milliseconds {
            if t == lastTime {
                repeats += 1
                out[k].id = "\(PositionID(prefix: idPrefix, number: t))-\(repeats)"
            } else {
                out[k].identifier = PositionID(prefix: idPrefix, number: t)
                lastTime = t
                repeats = 0
            }
            if recentEpochs.count == 8 { recentEpochs.removeFirst() }
            recentEpochs.append(t)
        } else {
            untimed += 1
            out[k].identifier = PositionID(prefix: untimedPrefix, number: Int64(untimed))
        }
        // NMEA epochs already out stay as they are; from now on they are matched against NAV-PVT.
        sawNavPVT = true
    }

    private static func worst(_ statuses: [AntennaStatus]) -> AntennaStatus? {
        if statuses.contains(.short) { return .short }
        if statuses.contains(.open) { return .open }
        return statuses.first
    }

    private static func lessSevere(_ a: JammingState, _ b: JammingState) -> Bool {
        let order: [JammingState] = [.ok, .warning, .critical]
        return (order.firstIndex(of: a) ?? 0) < (order.firstIndex(of: b) ?? 0)
    }
}
