import GatewayCore
@testable import GpsdInput
import Testing

/// gpsd 3.22's own reports for each log (the JSON lines of its `.chk`), fed to the stream as if
/// gpsd sent them: one position per epoch, equal to gpsd's last TPV of that epoch.
@Suite(.timeLimit(.minutes(3))) struct ChkReplayTests {
    /// Logs where the README's "last TPV per time" differs from us, with why.
    static let explained: [String: (count: Int, reason: String)] = [
        "humminbird-M37.log": (9, """
            The log is spliced: after 19:41:24 it goes back to 19:41:11 with other fixes. gpsd reports \
            both passes and the README rule keeps the last; we keep the first position of an epoch \
            and drop the repeat (counted as gpsd.late_tpv), because a position id names one epoch and \
            a second position with the same id would be dropped downstream as a duplicate anyway.
            """),
    ]

    static func replay(_ log: String, chunk: Int? = nil) throws -> (positions: [Position], stream: GpsdStream) {
        var bytes: [UInt8] = []
        for line in GpsdChk.jsonLines(try TestSupport.chk(log)) { bytes += line + [13, 10] }
        var stream = GpsdStream(configuration: GpsdSourceConfiguration(), source: "gps")
        var out: [Position] = []
        let now = MonotonicInstant(sinceOrigin: .seconds(100))
        let size = chunk ?? bytes.count
        var i = 0
        while i < bytes.count {
            let part = Array(bytes[i..<min(i + size, bytes.count)])
            part.withUnsafeBytes { stream.feed($0, now: now, into: &out) }
            i += size
        }
        stream.endOfConnection(into: &out)
        return (out, stream)
    }

    @Test(arguments: TestSupport.chkLogs)
    func everyEpochMatchesGpsdsLastTPV(log: String) throws {
        let (ours, stream) = try Self.replay(log)
        let gpsd = GpsdChk.epochs(chk: try TestSupport.chk(log))
        let problems = GpsdChk.problems(ours: ours, gpsd: gpsd)
        #expect(problems.count == (Self.explained[log]?.count ?? 0), "\(log): \(problems.prefix(5))")
        #expect(ours.count == gpsd.count, "\(log): \(ours.count) positions for \(gpsd.count) gpsd epochs")
        #expect(stream.badJSON == 0)
        // Ids are unique.
        #expect(Set(ours.map(\.id)).count == ours.count)
    }

    @Test func chunkingDoesNotChangeTheOutput() throws {
        let whole = try Self.replay("ublox-neo-m9n-nmea.log").positions
        for size in [1, 7, 500] {
            #expect(try Self.replay("ublox-neo-m9n-nmea.log", chunk: size).positions == whole)
        }
    }

    @Test func skyFiguresReachThePositions() throws {
        let ours = try Self.replay("neo-m8n.log").positions
        #expect(ours.allSatisfy { $0.hdop != nil && $0.vdop != nil && $0.pdop != nil && $0.satellites != nil })
    }

    @Test func qualityFollowsGpsdStatus() throws {
        let ours = try Self.replay("nmea-rtk.log").positions
        let statuses = Set(ours.compactMap(\.quality))
        #expect(statuses.contains(.rtkFixed))
    }
}
