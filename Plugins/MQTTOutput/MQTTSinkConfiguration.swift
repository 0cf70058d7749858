import GatewayCore
import MQTTClient
import DeliveryEngine

/// Configuration of the `mqtt` sink (see the README for every option with its default).
public struct MQTTSinkConfiguration: QueuedSinkConfiguration {
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

    /// Broker, session, credentials, TLS, keepalive, reconnection (shared with the mqtt source).
    public var broker = MQTTBrokerConfiguration()
    public var qos = MQTTSinkPlugin.qos.defaultValue
    public var topic = MQTTSinkPlugin.topic.defaultValue
    public var retain = MQTTSinkPlugin.retain.defaultValue
    public var format: MQTTPayloadFormat = .json
    public var status: Status?
    public var maxInflight = MQTTSinkPlugin.maxInflight.defaultValue
    public var queue: OutboxMode = .memory(maxRecords: OutboxOptions.memoryCapacity)

    public init() {}
}
