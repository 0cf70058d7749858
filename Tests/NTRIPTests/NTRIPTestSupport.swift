import Foundation
import GatewayCore
import GatewayTesting
import Locking
import NTRIP
import RTCM

/// Collects what the client hands to the receiver's port.
final class FrameCollector: RTCMFrameWriter {
    let frames = Locked<[[UInt8]]>([])
    func write(_ frame: [UInt8]) async throws { frames.withLock { $0.append(frame) } }
    var all: [[UInt8]] { frames.withLock { $0 } }
    var count: Int { frames.withLock { $0.count } }
}

/// The RTCM 3 fixtures of the receiver stream tests (gpsd's logs, BSD-2-Clause, with their frames listed).
enum RTCMFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("ReceiverStreamTests/Fixtures/rtcm").path

    /// The log's bytes as the caster sent them (after gpsd's `#` header), and its good frames.
    static func stream(_ name: String) throws -> (bytes: [UInt8], frames: [[UInt8]]) {
        let file = Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(name).log")))
        let records = try String(contentsOfFile: "\(directory)/\(name).rtcm.jsonl", encoding: .utf8).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
        let first = records.compactMap { ($0["offset"] as? NSNumber)?.intValue }.min() ?? 0
        let frames = records.filter { ($0["crc_ok"] as? Bool) == true }.map { r -> [UInt8] in
            let o = (r["offset"] as? NSNumber)?.intValue ?? 0, n = (r["length"] as? NSNumber)?.intValue ?? 0
            return Array(file[o..<(o + n)])
        }
        return (Array(file[first...]), frames)
    }
}

/// The receiver's last fix as the source would keep it.
final class FixHolder: Sendable {
    private let state = Locked<Position?>(nil)
    var value: Position? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// A test's client: its configuration, writer, clock, log and the task running it.
final class ClientUnderTest: @unchecked Sendable {
    let client: NTRIPClient
    let frames = FrameCollector()
    let log = RecordingLogHandler()
    let fix = FixHolder()
    private var task: Task<Void, any Error>?

    init(_ configuration: NTRIPConfiguration, clock: any GatewayClock, tick: Duration = .milliseconds(5)) {
        let fix = self.fix
        client = NTRIPClient(configuration: configuration, writer: frames, lastFix: { fix.value }, clock: clock,
                             logger: log.logger(label: "sources.gnss.corrections"), tick: tick, random: { 0.5 })
    }

    func start() {
        let client = self.client
        task = Task { try await client.run() }
    }

    func stop() async {
        task?.cancel()
        _ = try? await task?.value
    }

    var statistics: NTRIPStatistics { client.statistics }

    func until(_ what: String, timeout: Duration = .seconds(20), _ condition: @escaping @Sendable (NTRIPStatistics) -> Bool) async throws {
        let client = self.client
        guard await Poll.until(timeout: timeout, { condition(client.statistics) }) else {
            throw PeerError(description: "timed out waiting for \(what): \(client.statistics)\n" + log.entries.map(\.description).joined(separator: "\n"))
        }
    }
}

extension ManualClock {
    /// Moves time forward in steps, each once the client looked at the clock (so what falls due
    /// is seen at its time, not after a jump).
    func advance(by total: Duration, step: Duration = .milliseconds(250), client: ClientUnderTest) async throws {
        var left = total
        while left > .zero {
            let d = min(step, left)
            advance(by: d)
            left -= d
            let target = now()
            try await client.until("the client to see \(target)") { ($0.lastTick ?? Timestamp(milliseconds: 0)) >= target || !$0.connected }
        }
    }
}
