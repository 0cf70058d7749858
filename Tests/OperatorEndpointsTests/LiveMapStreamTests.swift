import PluginCatalog
import GatewayCore
import GatewayTesting
import HTTPServing
@testable import OperatorEndpoints
import Synchronization
import Testing

/// The live map's stream body on its own: it never waits, says "later" when it has nothing, and
/// is woken by new positions and by its one-second timer.
@Suite(.timeLimit(.minutes(1)))
struct LiveMapStreamTests {
    func api() throws -> OperatorAPI {
        let json = """
        { "api": { "listen": "127.0.0.1:0" },
          "sources": { "gps": { "type": "udp", "bind": "127.0.0.1", "port": 1 } },
          "sinks": { "out": { "type": "file", "inputs": ["gps"], "path": "/dev/null" } } }
        """
        let configuration = try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry)
        return OperatorAPI(settings: try #require(configuration.api), configuration: configuration, stats: [], monitor: PipelineActivity(), version: "test")
    }

    func fix(_ n: Int) -> Position {
        Position(time: Timestamp(milliseconds: 1_772_366_400_000 + Int64(n) * 1000), latitude: 52.5 + Double(n) * 1e-4, longitude: 13.4,
                 mode: .threeD, source: "gps", device: "boat")
    }

    func text(_ chunk: HTTPStreamChunk) -> String? {
        guard case .bytes(let b) = chunk else { return nil }
        return String(decoding: b, as: UTF8.self)
    }

    @Test func itSaysLaterInsteadOfWaitingAndIsWokenByAPositionAndByItsTimer() async throws {
        let api = try api()
        let wakes = Atomic<Int>(0)
        let stream = LiveMapStream(api: api)
        stream.start(waker: HTTPStreamWaker { wakes.add(1, ordering: .relaxed) })
        #expect(text(stream.next())?.hasPrefix(#"data: {"type":"snapshot""#) == true)
        #expect(stream.next() == .later, "nothing new: no waiting, no bytes")

        let before = wakes.load(ordering: .relaxed)
        api.monitor.sourceEmitted("gps", [fix(1)])
        #expect(wakes.load(ordering: .relaxed) > before, "the position woke it at once, on the emitting thread")
        #expect(text(stream.next())?.contains(#"{"type":"position","device":"boat","point":[52.5001"#) == true)
        #expect(stream.next() == .later)

        // The timer wakes it for counters and heartbeats though nothing happens.
        let quiet = wakes.load(ordering: .relaxed)
        #expect(await Poll.until(timeout: .seconds(5)) { wakes.load(ordering: .relaxed) > quiet })

        stream.closed()
        let closed = wakes.load(ordering: .relaxed)
        api.monitor.sourceEmitted("gps", [fix(2)])
        #expect(wakes.load(ordering: .relaxed) == closed, "a closed stream is not woken by positions")
    }

    /// A motion event reaches the map with its details (the page shows "trip 1.2 km in 2 min …").
    @Test func aMotionEventIsSentWithItsDetails() throws {
        let api = try api()
        let stream = LiveMapStream(api: api)
        stream.start(waker: HTTPStreamWaker {})
        _ = stream.next()
        var end = fix(3)
        end.id = "gps-3-trip_end"
        end.event = PositionEvent(kind: .tripEnd)
        end.attributes = ["trip.duration_s": "120", "trip.distance_m": "1200"]
        api.monitor.transformEmitted("transforms.motion", [fix(3), end])
        let sent = try #require(text(stream.next()))
        #expect(sent.contains(#"{"type":"event","event":{"kind":"trip_end","device":"boat","#), "\(sent)")
        #expect(sent.contains(#""attributes":{"trip.distance_m":"1200","trip.duration_s":"120"}}}"#), "\(sent)")
        stream.closed()
    }

    @Test func itEndsWhenTheAPIStops() throws {
        let api = try api()
        let stream = LiveMapStream(api: api)
        stream.start(waker: HTTPStreamWaker {})
        _ = stream.next()
        api.stop()
        #expect(stream.next() == .end)
        stream.closed()
    }
}
