import GatewayCore
import Outbox

/// Configuration of the `mqtt` sink (see the README for every option with its default).
public struct MQTTSinkConfiguration: Sendable {
    /// What `retain` asks of the broker.
    public enum Retain: Sendable, Equatable {
        case never, always
        /// Only the newest queued position per topic is retained; a backlog goes out unretained
        /// first, so a late subscriber never sees an old fix as the current one.
        case last
    }

    /// The retained status messages and the will.
    public struct Status: Sendable, Equatable {
        public var topic: String
        public var online: String
        public var offline: String
    }

    public var host = "127.0.0.1"
    public var port = 1883
    public var useTLS = false
    /// nil: `locgate-<host name>-<sink id>`, chosen when the sink is built.
    public var clientID: String?
    public var cleanSession = false
    public var protocolVersion = "5"
    public var qos = 1
    public var topic = MQTTTopic.compile("locgate/{device}").topic ?? MQTTTopic(parts: [.literal("locgate")])
    public var retain: Retain = .never
    public var format: MQTTPayloadFormat = .json
    public var status: Status?
    public var username: String?
    public var password: String?
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    public var verify = true
    public var keepalive: Duration = .seconds(60)
    public var maxInflight = 100
    public var reconnectMax: Duration = .seconds(10)
    public var queue: OutboxMode = .memory(maxRecords: 100_000)

    public init() {}
}
