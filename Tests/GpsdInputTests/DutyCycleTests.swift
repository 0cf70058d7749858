import Foundation
import GatewayCore
import GatewayTesting
@testable import GpsdInput
import Locking
import Testing

/// Duty cycling against the real gpsd (gpsfake): the source stops watching between windows. The
/// windows are the source's clock's (a ``ManualClock`` the test moves), so the test waits for gpsd,
/// not for the windows.
@Suite(.serialized, .timeLimit(.minutes(1)), .enabled(if: Peers.gpsfakeAvailable, "needs Debian's gpsd and gpsd-clients"))
struct GpsdDutyCycleTests {
    @Test func watchIsDisabledBetweenWindowsAndPositionsArriveOnlyInside() async throws {
        let port = Peers.freePort()
        let period: Int64 = 6000, on: Int64 = 2000
        // Windows start at multiples of 6 s of wall time; the clock starts 1 s before one.
        let firstWindow = Timestamp(year: 2026, month: 1, day: 1).milliseconds
        let clock = ManualClock(start: Timestamp(milliseconds: firstWindow - 1000))
        let arrivals = Locked<[Int64]>([])
        let output = SourceOutput { batch in
            let now = clock.now().milliseconds
            arrivals.withLock { $0 += batch.map { _ in now } }
        }
        var duty = DutyCycleConfiguration(on: .seconds(2), every: .seconds(6))
        duty.emit = .all
        let log = RecordingLogHandler(minimumLevel: .debug)
        let context = ComponentContext(id: "gps", kind: .source, logger: Logger(label: "sources.gps", handler: log),
                                       stats: ComponentStats(id: "gps"), clock: clock)
        let source = GpsdPositionSource(configuration: TestSupport.configuration(port: port) { $0.dutyCycle = duty }, context: context)
        let gpsd = try GpsFake(logs: ["neo-m8n.log"], port: port, cycle: 0.02, once: false, debug: 4)
        defer { gpsd.stop() }
        func wall(_ ms: Int64) -> MonotonicInstant { clock.monotonicNow() + .milliseconds(ms - clock.now().milliseconds) }
        // The source connects at once (a refused connect would back off on the clock).
        #expect(await Poll.until { gpsd.log.contains("listening on port") })
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await source.run(output: output) }
            #expect(await Poll.until { log.entries.contains { $0.description.contains("connected to gpsd") } })
            for k in Int64(0)..<2 {
                let start = firstWindow + k * period
                #expect(await clock.advance(to: wall(start)), "log: \(log.entries)")
                // Inside the window: gpsd is watched again and reports (in real time).
                #expect(await Poll.until { arrivals.withLock { $0.contains { $0 >= start } } }, "window \(k): no position; log: \(log.entries)")
                #expect(await clock.advance(to: wall(start + on)))
                // The window is over: gpsd confirms the unwatch before the next one begins.
                let confirmed = k + 1
                #expect(await Poll.until { gpsd.log.components(separatedBy: #"{"class":"WATCH","enable":false"#).count - 1 >= confirmed },
                        "gpsd confirmed the unwatch")
                #expect(await clock.advance(to: wall(start + period - 1)))
            }
            group.cancelAll()
        }
        let commands = gpsd.log.split(separator: "\n").filter { $0.contains("<= client") && $0.contains("?WATCH") }
        let disables = commands.filter { $0.contains(#""enable":false"#) }
        #expect(disables.count >= 2, "gpsd saw: \(commands)")
        // Alternating: every disable follows an enable.
        let kinds = commands.map { $0.contains(#""enable":false"#) ? "off" : "on" }
        #expect(zip(kinds, kinds.dropFirst()).allSatisfy { $0 != $1 }, "\(kinds)")
        let times = arrivals.withLock { $0 }
        #expect(!times.isEmpty)
        for t in times {
            let into = ((t % period) + period) % period
            #expect(into < on, "a position arrived \(into) ms into the period, outside the 2 s window")
        }
    }
}
