import Foundation
import GatewayCore
@testable import GpsdInput
import Locking
import Testing

/// Duty cycling against the real gpsd (gpsfake): the source stops watching between windows.
@Suite(.serialized, .timeLimit(.minutes(1)), .enabled(if: Peers.gpsfakeAvailable, "needs Debian's gpsd and gpsd-clients"))
struct GpsdDutyCycleTests {
    @Test func watchIsDisabledBetweenWindowsAndPositionsArriveOnlyInside() async throws {
        let port = Peers.freePort()
        let arrivals = Locked<[Int64]>([])
        let output = SourceOutput { batch in
            let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
            arrivals.withLock { $0 += batch.map { _ in now } }
        }
        var duty = DutyCycleConfiguration(on: .seconds(2), every: .seconds(6))
        duty.emit = .all
        let source = GpsdPositionSource(configuration: TestSupport.configuration(port: port) { $0.dutyCycle = duty }, context: TestSupport.context())
        let gpsd = try GpsFake(logs: ["neo-m8n.log"], port: port, cycle: 0.02, once: false, debug: 4)
        defer { gpsd.stop() }
        let period: Int64 = 6000, on: Int64 = 2000
        func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
        let firstWindow = (nowMs() / period + 1) * period
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run(output: output) }
            // Two whole windows after the next boundary, and the sleep after each.
            try await Task.sleep(for: .milliseconds(firstWindow + 2 * period + on + 1000 - nowMs()))
            group.cancelAll()
        }
        let log = gpsd.log
        let commands = log.split(separator: "\n").filter { $0.contains("<= client") && $0.contains("?WATCH") }
        let disables = commands.filter { $0.contains(#""enable":false"#) }
        #expect(disables.count >= 2, "gpsd saw: \(commands)")
        // Alternating: every disable follows an enable.
        let kinds = commands.map { $0.contains(#""enable":false"#) ? "off" : "on" }
        #expect(zip(kinds, kinds.dropFirst()).allSatisfy { $0 != $1 }, "\(kinds)")
        #expect(log.contains(#"{"class":"WATCH","enable":false"#), "gpsd confirmed the unwatch")
        let times = arrivals.withLock { $0 }
        #expect(!times.isEmpty)
        for t in times where t >= firstWindow - period {
            let into = ((t % period) + period) % period
            #expect(into < on + 300, "a position arrived \(into) ms into the period, outside the 2 s window")
        }
    }
}
