/// Cuts a byte stream (an NTRIP caster's corrections, after any transfer decoding) into whole,
/// CRC-checked RTCM 3 frames, whatever the read boundaries.
///
/// Bytes outside frames are counted as junk and dropped; a frame whose CRC fails is counted and
/// the scan resumes at the byte after its preamble, so a false `D3` (or a false length) never
/// swallows the frames after it. What is carried between reads is at most one frame.
public struct RTCMStreamFramer: Sendable {
    /// What the framer saw.
    public struct Counters: Sendable, Equatable {
        /// Bytes fed.
        public var bytes = 0
        /// Whole frames with a good CRC.
        public var frames = 0
        /// Candidate frames whose CRC failed.
        public var badCRC = 0
        /// Bytes outside any good frame.
        public var junkBytes = 0

        public init() {}
    }

    public private(set) var counters = Counters()
    private var carry: [UInt8] = []

    public init() {
        carry.reserveCapacity(RTCMFrame.maxPayload + RTCMFrame.overhead)
    }

    /// Feeds bytes; calls `frame` with each whole frame, in order (the buffer is valid only during the call).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, frame: (UnsafeRawBufferPointer) -> Void) {
        counters.bytes += bytes.count
        carry.append(contentsOf: bytes)
        var i = 0
        var local = counters
        carry.withUnsafeBytes { all in
            let n = all.count
            while i < n {
                if all[i] != RTCMFrame.preamble {
                    local.junkBytes += 1
                    i += 1
                    continue
                }
                switch RTCMFrame.check(UnsafeRawBufferPointer(rebasing: all[i..<n])) {
                case .frame(let length):
                    local.frames += 1
                    frame(UnsafeRawBufferPointer(rebasing: all[i..<(i + length)]))
                    i += length
                case .incomplete:
                    return
                case .notFrame(let badCRC):
                    if badCRC { local.badCRC += 1 }
                    local.junkBytes += 1
                    i += 1
                }
            }
        }
        counters = local
        if i > 0 { carry.removeFirst(i) }
    }

    /// Bytes held back as the start of a frame still arriving.
    public var pendingBytes: Int { carry.count }

    /// Forgets a partial frame (a new connection starts a new stream); counts it as junk.
    public mutating func reset() {
        counters.junkBytes += carry.count
        carry.removeAll(keepingCapacity: true)
    }
}
