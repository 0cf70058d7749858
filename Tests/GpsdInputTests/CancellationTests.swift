import GatewayCore
import GatewayTesting
import GpsdInput
import Testing

/// Cancellation reaches a source that is waiting for gpsd's next report.
@Suite(.timeLimit(.minutes(1))) struct CancellationTests {
    /// A gpsd that sent its VERSION banner and then stays silent: the source is waiting on the
    /// socket when it is cancelled, and returns at once rather than when a poll slice runs out.
    @Test func cancellingASourceWaitingForReportsReturnsPromptly() async throws {
        let server = FakeGpsd { _ in Array(FaultTests.version.utf8) }
        defer { server.stop() }
        let context = TestSupport.context()
        // No timer is due for seconds: only the cancellation can end the wait early.
        let config = TestSupport.configuration(port: server.port) { $0.idleFlush = .seconds(15) }
        let source = GpsdPositionSource(configuration: config, context: context)
        let clock = ContinuousClock()
        let elapsed = try await withThrowingTaskGroup(of: Duration?.self) { group in
            group.addTask { try await source.run(output: PositionCollector().output); return nil }
            // The banner was read: the source is back waiting on the socket.
            #expect(await Poll.until(timeout: .seconds(30)) { context.stats.value("gpsd.reports") == 1 })
            let start = clock.now
            group.cancelAll()
            _ = try await group.next()
            return clock.now - start
        }
        // Loose for a loaded 2-core machine; the old 200 ms poll slices took up to 200 ms here.
        #expect(elapsed < .seconds(1), "cancellation took \(elapsed)")
    }
}
