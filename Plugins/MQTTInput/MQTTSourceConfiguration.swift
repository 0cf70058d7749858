import GatewayCore
import MQTTClient

/// Configuration of the `mqtt` source (see the README for every option with its default).
public struct MQTTSourceConfiguration: Sendable {
    /// How a message body becomes a position.
    public enum Format: String, Sendable, CaseIterable {
        /// A position object in locgate's JSON (gpsd TPV names).
        case json
        /// An OwnTracks message; `_type` `location` is a position, other types are skipped.
        case owntracks
        /// OwnTracks when the object has a `_type`, else json.
        case auto
    }

    /// Broker, session, credentials, TLS, keepalive, reconnection (shared with the mqtt sink).
    public var broker = MQTTBrokerConfiguration()
    /// Topic filters, subscribed at QoS 1.
    public var topics: [String] = []
    public var format = MQTTSourcePlugin.format.defaultValue
    /// nil: the topic's last two levels (`owntracks/<user>/<device>` → `<user>/<device>`).
    public var device: MQTTDeviceTemplate?
    public var maxUnacked = MQTTSourcePlugin.maxUnacked.defaultValue
    public var maxMessageBytes = MQTTSourcePlugin.maxMessageBytes.defaultValue

    public init() {}
}
