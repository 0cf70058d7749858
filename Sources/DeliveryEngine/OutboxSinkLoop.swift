import GatewayCore
import Locking

/// Hands one record to a broker client library (the half of a broker sink that talks to the peer).
///
/// Implementation requirements:
/// - `done` is called exactly once per successful `publish`, from any thread: `.accepted` only on the
///   broker's acknowledgement for that message (MQTT PUBACK/PUBCOMP, JetStream PubAck), or at once
///   for modes documented as lossy (QoS 0, core NATS).
/// - `publish` throws when the record cannot be handed over now (not connected, the library's queue
///   is full); `done` is then never called and the loop tries again after a backoff.
public protocol OutboxTransport: Sendable {
    func publish(_ record: OutboxRecord, retain: Bool, done: @escaping @Sendable (OutboxAck) -> Void) throws
}

/// Thrown by ``OutboxTransport/publish(_:retain:done:)`` for a record that can never be sent (an
/// invalid topic, a message over the broker's size limit): it goes to the dead letters instead of
/// blocking every record behind it.
public struct OutboxRejection: Error, CustomStringConvertible {
    public var reason: String
    public init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// A broker's answer for one message.
public enum OutboxAck: Sendable {
    case accepted
    /// Not delivered, may succeed later (timeout, lost connection, broker busy): sent again.
    case retry(reason: String)
    /// Refused for good (not authorised, too large): moved to the dead letters.
    case rejected(reason: String)
}

/// The run loop of a broker sink: one task commits what arrives, another publishes what is queued.
///
///     SinkInput ──▶ commit (OutboxWriter) ──▶ [outbox] ──▶ publish, ≤ window unacknowledged ──▶ transport
///                                               ▲                                               │
///                                               └──── delete on .accepted (batched) ◀── acks ───┘
///
/// - A row is deleted only on `.accepted`. Deletes run on the outbox's own thread, one at a time,
///   while publishing goes on; each takes every ack that arrived during the one before (one
///   transaction). A full disk keeps them for a later try (``QueueWrites``).
/// - `.retry` puts a record back: it is sent again, oldest first, after a capped backoff, before new
///   records; order among records that never failed is queue order.
/// - With `retainNewestPerKey`, a record is published with `retain` only when it is the newest queued
///   record of its key, so a backlog goes out unretained and the retained message is never older
///   than the newest one sent.
/// - Returns when the input ended and the queue is empty, or, with a durable queue, at once when
///   the pipeline asks for a prompt stop (``OutboxHalves``); on cancellation (the shutdown
///   deadline) throws `CancellationError`. Either way what is left stays queued for the next start.
public struct OutboxSinkLoop: Sendable {
    let writer: OutboxWriter
    let window: Int
    let retainNewestPerKey: Bool
    let statsPrefix: String
    let retryInitial: Duration
    let retryMax: Duration
    /// How long a delete that found the disk full waits before it is tried again.
    let diskRetry: Duration

    public var outbox: any Outbox { writer.outbox }
    var context: ComponentContext { writer.context }

    public init(outbox: any Outbox, mode: OutboxMode, context: ComponentContext, window: Int, retainNewestPerKey: Bool,
                statsPrefix: String, retryInitial: Duration = .milliseconds(200), retryMax: Duration = .seconds(30),
                diskRetry: Duration = .seconds(1)) {
        writer = OutboxWriter(outbox: outbox, mode: mode, context: context)
        self.window = max(1, window)
        self.retainNewestPerKey = retainNewestPerKey
        self.statsPrefix = statsPrefix
        self.retryInitial = retryInitial
        self.retryMax = retryMax
        self.diskRetry = diskRetry
    }

    public func run(input: any SinkInput, transport: any OutboxTransport, encode: @escaping @Sendable (Position) -> OutboxEntry) async throws {
        let signal = OutboxSignal(clock: context.clock)
        let acks = AckInbox(signal: signal, wakeEvery: max(1, window / 8))
        if outbox.depth > 0 { context.logger.info("resuming with \(outbox.depth) queued position(s)") }
        defer { writer.reportLeftOver() }
        try await OutboxHalves.run(input: input, writer: writer, receive: {
            while let batch = await input.next() {
                try await writer.commit(batch.map(encode), acknowledging: input)
                signal.post()
            }
            signal.post(ended: true)
        }, deliver: {
            var publisher = OutboxPublisher(loop: self, transport: transport, signal: signal, acks: acks)
            try await publisher.run()
        })
    }
}

/// The outcome of the delete in progress (``Outbox/remove(_:done:)``), until the publishing task takes it.
final class DeleteInbox: Sendable {
    private let outcome = Locked<([Int64], Result<Void, any Error>)?>(nil)
    private let signal: OutboxSignal

    init(signal: OutboxSignal) { self.signal = signal }

    func post(_ seqs: [Int64], _ result: Result<Void, any Error>) {
        outcome.withLock { $0 = (seqs, result) }
        signal.post()
    }

    func take() -> ([Int64], Result<Void, any Error>)? {
        outcome.withLock { o in
            defer { o = nil }
            return o
        }
    }
}

/// Acks from the client library's threads, collected until the publishing task takes them.
///
/// A broker acknowledges tens of thousands of messages a second; waking the publishing task for
/// each would cost more than the publishing. It is woken once `wakeEvery` acks are waiting (room
/// for a refill), for every ack that is not an acceptance (a retry or a refusal is handled at
/// once), and when nothing handed over is left unanswered (the end of a burst).
final class AckInbox: Sendable {
    private struct State {
        var acks: [(Int64, OutboxAck)] = []
        /// Records handed to the transport whose ack has not arrived.
        var outstanding = 0
    }

    private let state = Locked(State())
    private let signal: OutboxSignal
    private let wakeEvery: Int

    init(signal: OutboxSignal, wakeEvery: Int) {
        self.signal = signal
        self.wakeEvery = max(1, wakeEvery)
    }

    /// Counts a record about to be handed over (before, so its ack cannot come first).
    func handedOver() { state.withLock { $0.outstanding += 1 } }

    /// Undoes ``handedOver()`` for a record the transport did not take.
    func notHandedOver() { state.withLock { $0.outstanding -= 1 } }

    func post(_ seq: Int64, _ ack: OutboxAck) {
        let wake = state.withLock { s in
            s.acks.append((seq, ack))
            s.outstanding -= 1
            if case .accepted = ack { return s.acks.count >= wakeEvery || s.outstanding <= 0 }
            return true
        }
        if wake { signal.post() }
    }

    func take() -> [(Int64, OutboxAck)] {
        state.withLock { s in
            let out = s.acks
            s.acks.removeAll(keepingCapacity: true)
            return out
        }
    }
}
