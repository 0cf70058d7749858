import Locking

/// RTCM frames on their way to the receiver's port: the NTRIP client puts each whole frame in,
/// the task that owns the port takes them out between its reads and writes them — so only one
/// task ever touches the port, and a frame is never cut by a read or by another write.
///
/// Bounded by bytes (``highWatermark``): when the port cannot keep up (the receiver's baud rate
/// too low for the stream, or the port closed for a reconnect), the **oldest** frames are
/// dropped, whole, and counted. Corrections are only useful fresh: a receiver given a backlog
/// uses the newest observation anyway, and late ones age every solution. Blocking the client
/// instead would stall the caster's connection and lose the stream.
public final class CorrectionsQueue: RTCMFrameWriter, Sendable {
    /// What went through the queue.
    public struct Counters: Sendable, Equatable {
        public var framesIn = 0
        public var framesOut = 0
        public var bytesOut = 0
        /// Frames dropped because the queue was over its watermark.
        public var framesDropped = 0
        public init() {}
    }

    private struct State {
        var frames: [[UInt8]] = []
        var bytes = 0
        var counters = Counters()
    }

    /// The most bytes held; past it the oldest frames go (16 KiB: several seconds of a typical
    /// MSM7 stream at 1 Hz, well under a second of a 115200-baud port's time).
    public let highWatermark: Int
    private let state = Locked(State())
    private let pending: @Sendable () -> Void

    /// - Parameter pending: called after each frame is queued: wakes the port's owner (its
    ///   `Wakeup.signal`), which then calls ``take()``.
    public init(highWatermark: Int = 16 * 1024, pending: @escaping @Sendable () -> Void = {}) {
        self.highWatermark = highWatermark
        self.pending = pending
    }

    /// Queues one frame (never blocks).
    public func write(_ frame: [UInt8]) async throws {
        state.withLock { s in
            s.frames.append(frame)
            s.bytes += frame.count
            s.counters.framesIn += 1
            while s.bytes > highWatermark, s.frames.count > 1 {
                s.bytes -= s.frames.removeFirst().count
                s.counters.framesDropped += 1
            }
        }
        pending()
    }

    /// Every queued frame, in order, as one buffer to write (empty when none); they count as written.
    public func take() -> [UInt8] {
        state.withLock { s in
            guard !s.frames.isEmpty else { return [] }
            var out: [UInt8] = []
            out.reserveCapacity(s.bytes)
            for f in s.frames { out += f }
            s.counters.framesOut += s.frames.count
            s.counters.bytesOut += s.bytes
            s.frames.removeAll(keepingCapacity: true)
            s.bytes = 0
            return out
        }
    }

    /// Forgets what is queued (the port closed); the frames count as dropped.
    public func discard() {
        state.withLock { s in
            s.counters.framesDropped += s.frames.count
            s.frames.removeAll()
            s.bytes = 0
        }
    }

    public var counters: Counters { state.withLock { $0.counters } }
    public var pendingBytes: Int { state.withLock { $0.bytes } }
}
