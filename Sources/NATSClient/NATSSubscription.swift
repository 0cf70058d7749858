// One of the files that talk to libnats (see NATSConnection.swift): subscriptions and the messages they receive.
import CNats
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// A subscription: a pull subscription bound to a durable JetStream consumer, or a core NATS
/// subscription. Its handle is destroyed in deinit; the connection is kept alive until then.
///
/// Thread-safety: libnats' subscription calls may come from any thread; waiting calls (`fetch`,
/// `next`) run on a Dispatch queue with a timeout, so a cancelled caller returns within it.
public final class NATSSubscription: @unchecked Sendable {
    private let sub: OpaquePointer
    private let connection: NATSConnection
    /// Pull (JetStream, fetched on request) or core (pushed by the server).
    public let isPull: Bool

    init(_ sub: OpaquePointer, connection: NATSConnection, pull: Bool) {
        self.sub = sub; self.connection = connection; self.isPull = pull
    }

    deinit { natsSubscription_Destroy(sub) }

    /// Pull subscriptions: asks the consumer for up to `batch` messages and waits up to `timeout`
    /// for them; returns early with fewer when the consumer has no more now, and `[]` when none
    /// came in time.
    public func fetch(batch: Int, timeout: Duration) async throws -> [NATSReceivedMessage] {
        precondition(isPull, "fetch is for pull subscriptions")
        return try await NATSConnection.blocking { [self] in
            var list = natsMsgList()
            var code = jsErrCode(0)
            let s = natsSubscription_Fetch(&list, sub, Int32(clamping: batch), max(1, timeout.milliseconds), &code)
            if s == NATS_TIMEOUT { return [] }
            try NATSConnection.check(s, "fetch", code: code)
            defer { natsMsgList_Destroy(&list) }
            var out: [NATSReceivedMessage] = []
            out.reserveCapacity(Int(list.Count))
            for i in 0..<Int(list.Count) {
                if let m = list.Msgs?[i] { out.append(NATSSubscription.received(m, jetStream: true)) }
            }
            return out
        }
    }

    /// Core subscriptions: waits up to `timeout` for a message, then takes what else is already
    /// waiting in the client, up to `max` in all; `[]` when none came in time.
    public func next(max: Int, timeout: Duration) async throws -> [NATSReceivedMessage] {
        try await NATSConnection.blocking { [self] in try nextNow(max: max, timeout: timeout) }
    }

    /// ``next(max:timeout:)`` on the calling thread, blocking it: for a thread of its own (a
    /// store's watcher), never a cooperative one.
    public func nextNow(max: Int, timeout: Duration) throws -> [NATSReceivedMessage] {
        precondition(!isPull, "next is for core subscriptions")
        return try {
            var first: OpaquePointer?
            let s = natsSubscription_NextMsg(&first, sub, Swift.max(1, timeout.milliseconds))
            if s == NATS_TIMEOUT { return [] }
            // A slow consumer is reported once per overflow; the dropped count tells how many.
            if s == NATS_SLOW_CONSUMER { return [] }
            try NATSConnection.check(s, "next message")
            guard let first else { return [] }
            var out = [NATSSubscription.received(first, jetStream: false)]
            natsMsg_Destroy(first)
            var waiting: Int32 = 0
            var bytes: Int32 = 0
            _ = natsSubscription_GetPending(sub, &waiting, &bytes)
            for _ in 0..<min(Int(waiting), max - 1) {
                var m: OpaquePointer?
                guard natsSubscription_NextMsg(&m, sub, 1) == NATS_OK, let m else { break }
                out.append(NATSSubscription.received(m, jetStream: false))
                natsMsg_Destroy(m)
            }
            return out
        }()
    }

    /// Core subscriptions: messages the client dropped because `pendingLimit` were waiting.
    public var dropped: Int64 {
        var n: Int64 = 0
        _ = natsSubscription_GetDropped(sub, &n)
        return n
    }

    /// Stops the subscription at the server. A bound durable consumer stays, with its acks.
    public func close() async {
        _ = try? await NATSConnection.blocking { [self] in natsSubscription_Unsubscribe(sub) }
    }

    /// The acknowledgement target of a message is its reply subject (`$JS.ACK.…`), kept as a
    /// string so the C message can be freed at once.
    private static func received(_ m: OpaquePointer, jetStream: Bool) -> NATSReceivedMessage {
        let length = Int(natsMsg_GetDataLength(m))
        let payload = natsMsg_GetData(m).map { p in
            p.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        } ?? []
        var r = NATSReceivedMessage(subject: natsMsg_GetSubject(m).map { String(cString: $0) } ?? "", payload: payload)
        if let reply = natsMsg_GetReply(m).map({ String(cString: $0) }), !reply.isEmpty { r.ackToken = NATSAckToken(reply: reply) }
        if jetStream {
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            if natsMsg_GetMetaData(&meta, m) == NATS_OK, let md = meta?.pointee {
                r.deliveries = Int(md.NumDelivered)
                r.streamSequence = md.Sequence.Stream
                r.stream = md.Stream.map { String(cString: $0) }
            }
            jsMsgMetaData_Destroy(meta)
        }
        return r
    }
}
