import GatewayCore
import GatewayTesting
import NATSClient
@testable import NATSInput
import Testing

@Suite struct ConfigurationTests {
    @Test func defaults() throws {
        let c = try PluginOptions.valid(NATSSourcePlugin.self, #"{ "servers": ["nats://127.0.0.1:4222"], "stream": "LOCGATE", "consumer": "agg" }"#)
        #expect(c.jetstream)
        #expect(c.stream == "LOCGATE")
        #expect(c.consumer == "agg")
        #expect(c.filterSubject == nil)
        #expect(c.deliver == .all)
        #expect(c.maxAckPending == 2000)
        #expect(c.ackWait == .seconds(30))
        #expect(c.batch == 100)
        #expect(c.maxUnacked == 1000)
        #expect(c.format == .json)
        #expect(NATSSourcePlugin.claims(of: c) == ["nats consumer LOCGATE/agg"])
    }

    @Test func startTimeAndCoreSubject() throws {
        let t = try PluginOptions.valid(NATSSourcePlugin.self, #"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "deliver": "by_start_time", "start_time": "2024-05-01T00:00:00Z" }"#)
        #expect(t.deliver == .byStartTime(Timestamp(milliseconds: 1_714_521_600_000)))
        let core = try PluginOptions.valid(NATSSourcePlugin.self, #"{ "servers": ["nats://h"], "jetstream": false, "subject": "locgate.positions.>" }"#)
        #expect(!core.jetstream)
        #expect(core.subject == "locgate.positions.>")
        #expect(NATSSourcePlugin.claims(of: core).isEmpty)
    }

    @Test(arguments: [
        (#"{ "servers": ["nats://h"], "consumer": "c" }"#, ["sources.under_test.stream"]),
        (#"{ "servers": ["nats://h"], "stream": "S" }"#, ["sources.under_test.consumer"]),
        (#"{ "servers": ["nats://h"], "stream": "a.b", "consumer": "c" }"#, ["sources.under_test.stream"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "filter_subject": "a..b" }"#, ["sources.under_test.filter_subject"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "deliver": "by_start_time" }"#, ["sources.under_test.start_time"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "start_time": "2024-05-01T00:00:00Z" }"#, ["sources.under_test.start_time"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "deliver": "by_start_time", "start_time": "yesterday" }"#, ["sources.under_test.start_time"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "subject": "x" }"#, ["sources.under_test.subject"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "max_ack_pending": 10 }"#, ["sources.under_test.max_ack_pending"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "ack_wait": "10ms" }"#, ["sources.under_test.ack_wait"]),
        (#"{ "servers": ["nats://h"], "jetstream": false }"#, ["sources.under_test.subject"]),
        (#"{ "servers": ["nats://h"], "jetstream": false, "subject": "x", "stream": "S" }"#, ["sources.under_test.stream"]),
        (#"{ "servers": ["nats://h"], "stream": "S", "consumer": "c", "format": "owntracks" }"#, ["sources.under_test.format"]),
        (#"{ "stream": "S", "consumer": "c" }"#, ["sources.under_test.servers"]),
    ])
    func reportsEachProblemWithItsPath(json: String, paths: [String]) throws {
        let (_, problems) = try PluginOptions.read(NATSSourcePlugin.self, json)
        #expect(problems.map(\.path) == paths)
    }
}
