// The values the NATS client exchanges with its callers (errors, events, stream and consumer
// settings, messages): plain Swift, no libnats type. NATSConnection.swift is the file that talks
// to libnats and turns its structures into these.
import GatewayCore

/// A failed libnats call: `summary` names the operation (no dynamic values, good for a metric
/// label); `detail` is libnats' own text (nats_GetLastError), `jetStreamCode` the server's
/// JetStream error code when it sent one (10059: stream not found), else 0.
public struct NATSError: Error, CustomStringConvertible, Sendable {
    public let summary: String
    public let detail: String
    public let jetStreamCode: Int
    /// libnats' status name (`NATS_TIMEOUT`), for callers that branch on it.
    public let status: String

    public var description: String { detail.isEmpty ? summary : "\(summary): \(detail)" }
    public var isNotFound: Bool { status == "Not Found" || jetStreamCode == 10059 }
}

/// Something the connection reports on its own (from libnats' threads).
public enum NATSConnectionEvent: Sendable {
    /// Connected for the first time (to `url`).
    case connected(url: String)
    /// Lost the server; publishes are buffered until a reconnect.
    case disconnected
    case reconnected(url: String)
    /// A whole round over the servers failed; the next begins after `delay`.
    case retrying(round: Int, lastError: String, delay: Duration)
    /// An error the server or the library reported outside any call (a permissions violation).
    case asyncError(String)
    /// Closed for good: by `close()`, or by the library itself (it gives up on a server that
    /// refused the same credentials twice); `lastError` says why ("" after `close()`).
    case closed(lastError: String)
}

/// What JetStream answered to one asynchronous publish.
public enum NATSPublishResult: Sendable {
    /// Stored in `stream` at `sequence`; `duplicate` when the stream's duplicate window already
    /// had a message with the same `Nats-Msg-Id` (a re-send after a crash or a lost ack).
    case stored(stream: String, sequence: UInt64, duplicate: Bool)
    /// No PubAck within the ack timeout (lost on a disconnect, or a slow leader election).
    case timedOut
    /// No stream captures the subject (the server answered "no responders").
    case noResponders
    /// The server refused it; `code` is the JetStream error code (10060: the expected stream
    /// does not match the stream that captures the subject).
    case refused(code: Int, text: String)
    /// The connection was closed with the publish still pending.
    case abandoned(String)
}

/// A stream as the server describes it (the part locgate reads).
public struct NATSStreamInfo: Sendable, Hashable {
    public var name: String
    public var subjects: [String]
    public var replicas: Int
    public var duplicateWindow: Duration
    public var fileStorage: Bool
    public var messages: UInt64
    public var lastSequence: UInt64
    /// The server leading the stream's replicas ("" when it has none now, or when not clustered).
    public var leader = ""
    /// The other replicas as the leader sees them.
    public var followers: [Follower] = []

    /// A replica that follows the leader.
    public struct Follower: Sendable, Hashable {
        public var name: String
        /// Caught up with the leader.
        public var current: Bool
        /// Known to be down.
        public var offline: Bool
        /// Operations behind the leader.
        public var lag: UInt64
        /// How long since the leader last heard from it.
        public var lastActive: Duration
    }
}

/// One message read back from a stream.
public struct NATSStoredMessage: Sendable, Hashable {
    public var sequence: UInt64
    public var subject: String
    /// The `Nats-Msg-Id` header it was published with.
    public var messageID: String?
    public var payload: [UInt8]
}

/// A stream to create.
public struct NATSStreamConfig: Sendable, Hashable {
    public var name: String
    public var subjects: [String]
    public var replicas: Int
    public var duplicateWindow: Duration
    public var fileStorage: Bool

    public init(name: String, subjects: [String], replicas: Int, duplicateWindow: Duration, fileStorage: Bool) {
        self.name = name; self.subjects = subjects; self.replicas = replicas
        self.duplicateWindow = duplicateWindow; self.fileStorage = fileStorage
    }
}

/// Where a new consumer starts in its stream.
public enum NATSDeliverPolicy: Sendable, Hashable {
    /// From the first message the stream holds.
    case all
    /// Only messages stored after the consumer was created.
    case new
    /// From the first message stored at or after this time.
    case byStartTime(Timestamp)
}

/// A durable pull consumer to create (acks are always explicit: one per message).
public struct NATSConsumerConfig: Sendable, Hashable {
    public var stream: String
    public var durable: String
    /// Only messages on subjects matching this filter; nil for the whole stream.
    public var filterSubject: String?
    public var deliver: NATSDeliverPolicy
    /// Most messages delivered and not yet acknowledged; the server delivers no more beyond it.
    public var maxAckPending: Int
    /// How long the server waits for an ack before delivering the message again.
    public var ackWait: Duration

    public init(stream: String, durable: String, filterSubject: String?, deliver: NATSDeliverPolicy, maxAckPending: Int, ackWait: Duration) {
        self.stream = stream; self.durable = durable; self.filterSubject = filterSubject
        self.deliver = deliver; self.maxAckPending = maxAckPending; self.ackWait = ackWait
    }
}

/// A consumer as the server describes it (the part locgate reads).
public struct NATSConsumerInfo: Sendable, Hashable {
    public var stream: String
    public var name: String
    public var filterSubject: String?
    public var explicitAck = false
    /// No deliver subject: a pull consumer.
    public var pull = true
    public var ackWait: Duration = .zero
    public var maxAckPending = 0
    /// Delivered and not yet acknowledged.
    public var numAckPending = 0
    /// In the stream, matching the filter, not yet delivered.
    public var numPending: UInt64 = 0
    public var numRedelivered = 0
    public var deliveredStreamSequence: UInt64 = 0
    public var ackFloorStreamSequence: UInt64 = 0

    public init(stream: String, name: String) { self.stream = stream; self.name = name }
}

/// Where a message's acknowledgement goes (its JetStream reply subject); opaque to callers.
public struct NATSAckToken: Sendable, Hashable {
    let reply: String
}

/// How a JetStream message is answered.
public enum NATSAckKind: String, Sendable {
    /// Done: never delivered again.
    case ack = "+ACK"
    /// Not done: delivered again soon.
    case nak = "-NAK"
    /// Never deliver again, without processing it (bad input); the server reports it as terminated.
    case term = "+TERM"
}

/// One message received from a subscription, its payload copied out of the client.
public struct NATSReceivedMessage: Sendable {
    public var subject: String
    public var payload: [UInt8]
    /// JetStream messages: where the ack goes; nil for core messages without a reply subject.
    public var ackToken: NATSAckToken?
    /// JetStream: how many times the server delivered this message (1 the first time).
    public var deliveries: Int?
    public var streamSequence: UInt64?
    public var stream: String?

    public init(subject: String, payload: [UInt8]) { self.subject = subject; self.payload = payload }
}

/// JetStream settings of a connection.
public struct NATSJetStreamSettings: Sendable {
    /// Timeout of JetStream API requests (stream info, create).
    public var apiTimeout: Duration
    /// Most asynchronous publishes waiting for their PubAck; a publish beyond it waits up to
    /// `stallWait` for one to be answered, then fails (the caller retries later).
    public var maxPendingAcks: Int
    public var stallWait: Duration

    public init(apiTimeout: Duration = .seconds(5), maxPendingAcks: Int = 4000, stallWait: Duration = .milliseconds(200)) {
        self.apiTimeout = apiTimeout; self.maxPendingAcks = maxPendingAcks; self.stallWait = stallWait
    }
}

/// A Key-Value bucket to create when it is missing (a stream `KV_<bucket>` keeping the last
/// value of each key).
public struct NATSKeyValueConfig: Sendable, Hashable {
    public var bucket: String
    public var replicas: Int
    /// Values not written for this long are removed by the server; zero: kept forever.
    public var ttl: Duration
    public var fileStorage: Bool

    public init(bucket: String, replicas: Int, ttl: Duration, fileStorage: Bool = true) {
        self.bucket = bucket; self.replicas = replicas; self.ttl = ttl; self.fileStorage = fileStorage
    }
}

/// One key's current value in a bucket.
public struct NATSKeyValueEntry: Sendable, Hashable {
    public var key: String
    public var value: [UInt8]
    /// The bucket stream's sequence of this value: what a compare-and-swap update names.
    public var revision: UInt64
    /// When it was written (milliseconds since the epoch).
    public var createdMilliseconds: Int64
    /// A delete (or purge) marker: the key has no value since this revision.
    public var deleted = false

    public init(key: String, value: [UInt8], revision: UInt64, createdMilliseconds: Int64, deleted: Bool = false) {
        self.key = key; self.value = value; self.revision = revision; self.createdMilliseconds = createdMilliseconds; self.deleted = deleted
    }
}

/// What a compare-and-swap write of a key did.
public enum NATSKeyValueWrite: Sendable, Hashable {
    /// Stored (acknowledged by the bucket's stream) as this revision.
    case written(revision: UInt64)
    /// Refused: the key's last revision is not the one the write expected (someone else wrote
    /// it, or it exists where a create expected none). The server's text says which it has.
    case conflict(String)
}
