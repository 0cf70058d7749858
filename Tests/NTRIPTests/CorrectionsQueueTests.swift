import GatewayCore
import Locking
import NTRIP
import RTCM
import Testing

/// The queue between the NTRIP client and the port's owner.
@Suite struct CorrectionsQueueTests {
    static func frame(_ n: Int, size: Int = 100) -> [UInt8] { RTCMFrame.encode(payload: [UInt8](repeating: UInt8(n), count: size - 6)) }

    @Test func framesComeOutWholeAndInOrderAndWakeTheOwner() async throws {
        let wakes = Locked(0)
        let q = CorrectionsQueue { wakes.withLock { $0 += 1 } }
        for n in 0..<5 { try await q.write(Self.frame(n)) }
        #expect(wakes.withLock { $0 } == 5)
        #expect(q.take() == (0..<5).flatMap { Self.frame($0) })
        #expect(q.take().isEmpty)
        #expect(q.counters == { var c = CorrectionsQueue.Counters(); c.framesIn = 5; c.framesOut = 5; c.bytesOut = 500; return c }())
    }

    @Test func overTheWatermarkTheOldestFramesAreDroppedWhole() async throws {
        let q = CorrectionsQueue(highWatermark: 350)
        for n in 0..<6 { try await q.write(Self.frame(n)) }
        // 600 bytes offered, 350 allowed: frames 0–2 go, 3–5 stay (300 bytes).
        #expect(q.take() == (3..<6).flatMap { Self.frame($0) })
        #expect(q.counters.framesDropped == 3)
        // A frame larger than the watermark alone is still written, not lost.
        try await q.write(Self.frame(9, size: 1000))
        #expect(q.take().count == 1000)
        try await q.write(Self.frame(1))
        q.discard()
        #expect(q.take().isEmpty && q.counters.framesDropped == 4)
    }
}

/// The feed a source adds for corrections: the last fix it keeps for GGA.
@Suite struct CorrectionsFeedTests {
    @Test func theLastRealFixIsKeptForGGA() {
        let feed = CorrectionsFeed(configuration: NTRIPConfiguration(host: "127.0.0.1", mountpoint: "M"), clock: SystemClock(),
                                   logger: Logger(label: "t", handler: SilentLogHandler())) {}
        var fix = Position(datum: .wgs84, source: "gnss")
        fix.mode = .threeD
        fix.latitude = 48.2
        fix.longitude = 16.4
        var noFix = Position(datum: .wgs84, source: "gnss")
        noFix.mode = .noFix
        var event = fix
        event.latitude = 1
        event.event = PositionEvent(kind: .rtkLost, status: "gps")
        #expect(feed.fix == nil)
        feed.note([fix, noFix, event])
        #expect(feed.fix?.latitude == 48.2)
        feed.note([noFix])
        #expect(feed.fix?.latitude == 48.2, "a fix lost keeps the last one for GGA")
    }
}
