import GatewayCore
import NATSClient
import DeliveryEngine

/// Configuration of the `nats` sink (see the README for every option with its default).
public struct NATSSinkConfiguration: QueuedSinkConfiguration {
    /// The message body.
    public enum Format: String, Sendable, CaseIterable { case json }

    public var connection = NATSConnectionOptions()
    public var subject = NATSSinkPlugin.subject.defaultValue
    /// True: JetStream publish, a record is deleted on its PubAck. False: core NATS, deleted once
    /// a flush confirmed the server read it (lost when no subscriber listens: documented lossy).
    public var jetstream = NATSSinkPlugin.jetstream.defaultValue
    /// The stream that must capture the subject: checked at start, and sent with every message.
    public var expectStream: String?
    /// A stream to create when missing (never altered when it exists).
    public var stream: NATSStreamConfig?
    /// Most messages waiting for their PubAck (or flush): the outbox window.
    public var maxPending = NATSSinkPlugin.maxPending.defaultValue
    /// How long to wait for a PubAck (or a flush) before sending the message again.
    public var ackTimeout = NATSSinkPlugin.ackTimeout.defaultValue
    public var format = NATSSinkPlugin.format.defaultValue
    public var queue: OutboxMode = .memory(maxRecords: OutboxOptions.memoryCapacity)

    public init() {}
}
