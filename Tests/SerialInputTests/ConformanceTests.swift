import GatewayCore
import GatewayTesting
import SerialInput
import Testing

/// The source contract (``SourceConformance``) for the serial source, in process.
///
/// Only cancellation is checked here: libserialport opens socat's ptys only with the shim
/// preloaded (`Support/ptyshim.c`), which takes a process of its own, so bad input and
/// reconnection are checked through the binary (`SerialEndToEndTests`: noise, unplug and replug).
@Suite(.timeLimit(.minutes(1))) struct SerialSourceConformanceTests {
    static func make(_ json: String) -> (ComponentContext) throws -> any PositionSource {
        { context in try SerialSourcePlugin.makeSource(try PluginOptions.valid(SerialSourcePlugin.self, json), context: context) }
    }

    @Test func itStopsWhenCancelledWhileWaitingForAMissingPort() async throws {
        try await SourceConformance.checkCancellation(make: Self.make(#"{"port": "/dev/locgate-test-no-such-port", "backoff_cap": "10s"}"#))
    }

    @Test func itStopsWhenCancelledWhileWaitingForAMatchingReceiverToBePluggedIn() async throws {
        try await SourceConformance.checkCancellation(make: Self.make(#"{"match": {"vid": "fffe", "pid": "0001"}, "backoff_cap": "10s"}"#))
    }
}
