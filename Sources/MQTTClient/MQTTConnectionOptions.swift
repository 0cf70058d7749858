import GatewayCore

/// Everything a connection needs, in Swift types only.
public struct MQTTConnectionOptions: Sendable {
    public enum ProtocolVersion: Sendable { case v311, v5 }
    public typealias TLS = ClientTLSOptions
    /// A message the connection publishes itself (the status topic's online and offline messages).
    public struct Message: Sendable {
        public var topic: String
        public var payload: [UInt8]
        public var qos: Int
        public var retain: Bool

        public init(topic: String, payload: [UInt8], qos: Int, retain: Bool) {
            self.topic = topic
            self.payload = payload
            self.qos = qos
            self.retain = retain
        }
    }

    public var host = "127.0.0.1"
    public var port = 1883
    public var clientID = ""
    public var cleanSession = false
    public var protocolVersion: ProtocolVersion = .v5
    public var keepalive = 60
    public var maxInflight = 100
    public var username: String?
    public var password: String?
    public var tls: TLS?
    /// Set as the will, so the broker publishes it when the connection dies without a DISCONNECT.
    public var will: Message?
    /// Published after every CONNACK; `will` is published before a clean disconnect.
    public var online: Message?
    public var reconnectInitial: Duration = .milliseconds(200)
    public var reconnectMax: Duration = .seconds(10)
    /// `mqtt://host:port` or `mqtts://…`, for log lines.
    public var displayURL = ""

    public init() {}
}

/// One message a subscription delivered.
public struct MQTTMessage: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    /// Sent because it was retained on the topic (a subscription's first look), not just published.
    public var retained: Bool

    public init(topic: String, payload: [UInt8], qos: Int, retained: Bool) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retained = retained
    }
}

/// What the connection does after a message handler returns.
public enum MQTTMessageDisposition: Sendable {
    /// Let libmosquitto send the PUBACK it queued before the handler ran.
    case handled
    /// Close the socket before that PUBACK is written, so the broker delivers the message again
    /// on the next session (the handler could not see it handled).
    case dropConnection
}
