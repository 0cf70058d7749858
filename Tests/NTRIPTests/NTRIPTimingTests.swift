import GatewayCore
import NTRIP
import Testing

/// Back-off and the per-connection timer, to the millisecond on given instants.
@Suite struct NTRIPTimingTests {
    static let configuration = NTRIPConfiguration(host: "caster", mountpoint: "M")

    @Test func failuresBackOffFromTenSecondsDoublingToTheCap() {
        var p = NTRIPRetryPolicy(configuration: Self.configuration)
        let middle = (0..<8).map { _ in p.delay(after: .failed, random: 0.5) }
        #expect(middle == [10, 20, 40, 80, 160, 300, 300, 300].map { .seconds($0) })
        // Jitter: ±20 %, never below the initial 10 s.
        var q = NTRIPRetryPolicy(configuration: Self.configuration)
        #expect(q.delay(after: .failed, random: 0) == .seconds(10))
        #expect(q.delay(after: .failed, random: 1) == .seconds(24))
        #expect(q.delay(after: .failed, random: 0) == .seconds(32))
    }

    @Test func aStableConnectionResetsTheBackoffAndAShortOneDoesNot() {
        var p = NTRIPRetryPolicy(configuration: Self.configuration)
        _ = p.delay(after: .failed, random: 0.5)
        _ = p.delay(after: .failed, random: 0.5)
        #expect(p.delay(after: .ended(lasted: .seconds(5)), random: 0.5) == .seconds(40))
        #expect(p.delay(after: .ended(lasted: .seconds(60)), random: 0.5) == .seconds(10))
        #expect(p.delay(after: .failed, random: 0.5) == .seconds(20))
    }

    @Test func a401WaitsTheSlowRetryWhateverTheBackoff() {
        var p = NTRIPRetryPolicy(configuration: Self.configuration)
        #expect(p.delay(after: .unauthorized, random: 0.5) == .seconds(600))
        #expect(p.delay(after: .unauthorized, random: 0) == .seconds(480))
    }

    static func at(_ s: Double) -> Timestamp { Timestamp(milliseconds: Int64(s * 1000)) }

    @Test func ggaKeepsItsCadenceAndWaitsForAFix() {
        var t = NTRIPSessionTimer(start: Self.at(0), stallTimeout: .seconds(20), ggaInterval: .seconds(5), sendsGGA: true)
        // No fix yet: nothing to send, only the stall deadline.
        #expect(t.next(now: Self.at(0), haveFix: false) == .wait(until: Self.at(20)))
        #expect(t.next(now: Self.at(1.5), haveFix: true) == .sendGGA)
        t.ggaSent(at: Self.at(1.5))
        t.bytesArrived(at: Self.at(2))
        #expect(t.next(now: Self.at(2), haveFix: true) == .wait(until: Self.at(6.5)))
        // Checked 0.4 s late: sent then, and the next is still due on the cadence.
        #expect(t.next(now: Self.at(6.9), haveFix: true) == .sendGGA)
        t.ggaSent(at: Self.at(6.9))
        #expect(t.nextGGA == Self.at(11.5))
        // A fix lost for long: the cadence restarts from the next send.
        t.bytesArrived(at: Self.at(30))
        #expect(t.next(now: Self.at(30), haveFix: false) == .wait(until: Self.at(50)))
        t.ggaSent(at: Self.at(31))
        #expect(t.nextGGA == Self.at(36))
    }

    @Test func noBytesForTheStallTimeoutIsAStall() {
        var t = NTRIPSessionTimer(start: Self.at(0), stallTimeout: .seconds(20), ggaInterval: .seconds(5), sendsGGA: false)
        t.bytesArrived(at: Self.at(3))
        #expect(t.next(now: Self.at(22.999), haveFix: true) == .wait(until: Self.at(23)))
        #expect(t.next(now: Self.at(23), haveFix: true) == .stalled)
    }
}
