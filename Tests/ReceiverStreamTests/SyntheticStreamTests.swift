import Foundation
import GatewayCore
import GatewayTesting
import NMEA
import ReceiverStream
import Testing
import UBX

/// The synthetic stream (Fixtures/synthetic): what no real log has — RTK fixed, time only,
/// gnssFixOK = 0, invalidLlh, jamming, an open and a shorted antenna, UBX between NMEA.
@Suite struct SyntheticStreamTests {
    static func decoded() throws -> Decoded { decodeStream(try StreamFixtures.bytes("synthetic/synthetic-rtk.ubx")) }

    @Test func eachEpochIsOnePositionFromItsNavPVT() throws {
        let d = try Self.decoded()
        // 13 epochs, each with NAV-PVT and GGA + RMC of the same time: NAV-PVT wins, NMEA is superseded.
        #expect(d.positions.count == 13)
        #expect(d.positions == d.ubxPositions)
        #expect(d.statistics.superseded == 13)
        #expect(d.statistics.badChecksum == 0 && d.statistics.accepted == 26, "$ CR LF inside epoch 4's NAV-PVT reached the NMEA framer")
        let oracle = try StreamFixtures.records("synthetic/synthetic-rtk.navpvt.jsonl").filter { $0["msg"] as? String == "NAV-PVT" }
        for (p, r) in zip(d.positions, oracle) { UBXLogTests.expect(p, matches: r, log: "synthetic") }
    }

    @Test func modesAndStatusesAreMappedAsDocumented() throws {
        let d = try Self.decoded()
        let got = d.positions.map { "\($0.mode.rawValue)/\($0.quality?.name ?? "-")/\($0.hasCoordinates ? "ll" : "none")" }
        #expect(got == [
            "3/gps/ll", "3/dgps/ll", "3/rtk_float/ll", "3/rtk_fixed/ll", "3/rtk_fixed/ll",
            "3/manual/ll",          // 5: time only
            "1/unknown/none",       // 6: gnssFixOK = 0
            "1/unknown/none",       // 7: invalidLlh
            "1/unknown/none",       // 8: no fix
            "2/gps/ll", "2/estimated/ll", "3/gnss_dead_reckoning/ll", "3/rtk_fixed/ll",
        ])
        // Epoch 2: second = 2, nano = -317 → 12:00:01.999999683, the epoch of 12:00:02.000.
        #expect(d.positions[2].time == Timestamp(iso8601: "2026-03-01T12:00:02.000Z"))
        #expect(d.positions[2].id == "rx-\(Timestamp(iso8601: "2026-03-01T12:00:02.000Z")!.milliseconds)")
        #expect(d.positions[3].correctionAge != nil && d.positions[0].correctionAge == nil)
    }

    @Test func monRFAndNavStatusBecomeReports() throws {
        let d = try Self.decoded()
        // MON-RF in epochs 0 (ok), 6 (jamming warning), 7 (critical), 10 (antenna open, jamming
        // state 0: unknown, no report), 11 (antenna short, jamming ok again).
        #expect(d.antenna == [.ok, .ok, .ok, .open, .short])
        let jamming = d.reports.compactMap { if case .jamming(let j) = $0 { j } else { nil } }
        #expect(jamming == [.ok, .warning, .critical, .ok])
        let spoofing = d.reports.compactMap { if case .spoofing(let s) = $0 { s } else { nil } }
        #expect(spoofing.count == 13 && spoofing.allSatisfy { $0 == .notIndicated })
    }

    /// The whole stream through ReceiverHealth, as a source with `health` feeds it.
    @Test func healthEventsFollowTheReceiver() throws {
        let bytes = try StreamFixtures.bytes("synthetic/synthetic-rtk.ubx")
        let log = RecordingLogHandler()
        var health = ReceiverHealth(configuration: HealthConfiguration(), source: "rx", logger: log.logger(label: "rx"), stats: ComponentStats(id: "rx"))
        var decoder = ReceiverStreamDecoder(options: StreamOptions.replay)
        var events: [String] = []
        let now = Timestamp(milliseconds: 1_772_366_400_000)
        // Epoch by epoch: each NAV-EOE … the next epoch's NAV-PVT is one read.
        var offset = 0
        let starts = try StreamFixtures.records("synthetic/synthetic-rtk.navpvt.jsonl").filter { $0["msg"] as? String == "NAV-PVT" }.map { $0.int("offset") } + [bytes.count]
        for end in starts.dropFirst() {
            var positions: [Position] = []
            bytes[offset..<end].withUnsafeBytes { decoder.decode($0, into: &positions) }
            offset = end
            var out: [Position] = []
            for s in decoder.takeAntennaReports() { health.antenna(s, device: "rx", at: now, into: &out) }
            for r in decoder.takeReceiverReports() { health.report(r, device: "rx", at: now, into: &out) }
            health.record(positions, at: now, into: &out)
            events += out.compactMap { p in p.event.map { "\($0.kind.rawValue)\($0.status.map { ":" + $0 } ?? "")" } }
        }
        #expect(events == [
            "rtk_float:rtk_float", "rtk_fixed:rtk_fixed", "rtk_lost:manual",
            "jamming:warning", "jamming:critical", "antenna:open", "antenna:short", "jamming:ok", "rtk_fixed:rtk_fixed",
        ])
    }

    @Test func compactMonRFBlocksGiveTheAntennaButNoJammingState() {
        // Two 20-byte blocks (ZED-F9R HPS 1.30): blockId, antStatus, antPower, cwSuppression, …
        var payload: [UInt8] = [0, 2, 0, 0]
        for (block, status) in [(0, 4), (1, 2)] as [(UInt8, UInt8)] {
            var b = [UInt8](repeating: 0, count: 20)
            b[0] = block; b[1] = status; b[2] = 1; b[3] = 200
            payload += b
        }
        let frame = UBXFrame.encode(.monRF, payload: payload)
        let rf = frame.withUnsafeBytes { MonRF(payload: UnsafeRawBufferPointer(rebasing: $0[6..<($0.count - 2)])) }
        #expect(rf?.layout == .compact20)
        #expect(rf?.blocks.map(\.jamInd) == [200, 200])
        let d = decodeStream(frame)
        #expect(d.antenna == [.open])
        #expect(d.reports.isEmpty)
        // A length that fits neither layout is refused, not guessed.
        #expect(MonRF(payload: [0, 2, 0, 0] + [UInt8](repeating: 0, count: 44)) == nil)
    }
}

extension MonRF {
    init?(payload: [UInt8]) {
        guard let v = payload.withUnsafeBytes({ MonRF(payload: $0) }) else { return nil }
        self = v
    }
}
