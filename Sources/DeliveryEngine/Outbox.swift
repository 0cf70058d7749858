import GatewayCore

/// One message waiting in an outbox: its payload is what goes on the wire (or, for http, the
/// position's JSON that the request body is built from).
public struct OutboxRecord: Sendable, Hashable {
    /// Queue order: strictly increasing, never reused.
    public var seq: Int64
    /// The position id (message id downstream: `Nats-Msg-Id`, OwnTracks `_id`, Idempotency-Key input).
    public var id: String
    /// What the sink groups records by (an MQTT topic, a NATS subject); empty when unused.
    public var key: String
    public var payload: [UInt8]
    /// Where the record's age counts from (ms since 1970), for `queue.max_age`: see ``OutboxAge``.
    public var enqueuedAt: Int64

    public init(seq: Int64, id: String, key: String = "", payload: [UInt8], enqueuedAt: Int64) {
        self.seq = seq
        self.id = id
        self.key = key
        self.payload = payload
        self.enqueuedAt = enqueuedAt
    }
}

/// What a sink commits for one position.
public struct OutboxEntry: Sendable {
    public var id: String
    public var key: String
    public var payload: [UInt8]
    /// The fix time (ms since 1970), if known.
    public var time: Int64?

    public init(id: String, key: String = "", payload: [UInt8], time: Int64?) {
        self.id = id
        self.key = key
        self.payload = payload
        self.time = time
    }
}

/// Where a sink that promises delivery keeps messages until the peer acknowledged them, oldest first.
///
/// Two implementations: ``SQLiteOutbox`` (a file in WAL mode; survives crashes and reboots) and
/// ``MemoryOutbox`` (lost with the process: the lossy `"queue": null` mode). Both are safe to use
/// from a sink's receiving and delivering tasks at once.
///
/// Implementation requirements:
/// - `append` is one transaction: when it throws, nothing of the batch was committed.
/// - A record leaves only through `remove`, `deadLetter`, the `max_records` cap in `append`, or
///   `dropOlder`; seqs are never reused, so a late acknowledgement cannot delete a newer record.
public protocol Outbox: AnyObject, Sendable {
    /// Where the outbox lives, for messages (`memory` for the memory outbox).
    var location: String { get }
    /// Commits entries at the end; returns how many old records the record cap dropped.
    func append(_ entries: [OutboxEntry], at now: Timestamp) throws -> Int
    /// ``append(_:at:)`` for a sink's receiving task: an outbox that writes a disk does it on a
    /// thread of its own, so the pipeline's thread is not held while it syncs.
    func commit(_ entries: [OutboxEntry], at now: Timestamp) async throws -> Int
    /// Up to `limit` records with a seq above `seq`, oldest first (`after: 0` reads from the front).
    func records(after seq: Int64, limit: Int) throws -> [OutboxRecord]
    /// Removes every record up to and including `seq`.
    ///
    /// Removals need not reach the disk before they return (an outbox on disk writes them to the
    /// operating system; its next commit syncs them): after a power cut, removed records may be
    /// back, never appended ones gone.
    func remove(through seq: Int64) throws
    /// ``remove(through:)``, then, when `next` is given, ``markInFlight(through:durably:)`` for the
    /// next batch; an outbox on disk does both in one transaction, synced when `durably`.
    func remove(through seq: Int64, markingInFlight next: Int64?, durably: Bool) throws
    /// Removes the given records (acknowledged out of order by a broker); unknown seqs are ignored.
    func remove(_ seqs: [Int64]) throws
    /// ``remove(_:)`` for a delivering loop that must not wait for it: an outbox that writes a
    /// disk does it on its own thread, in order with commits, so the loop goes on publishing while
    /// the disk syncs. `done` is called once, on any thread, with the outcome.
    func remove(_ seqs: [Int64], done: @escaping @Sendable (Result<Void, any Error>) -> Void)
    /// Runs `body`, writes to this outbox, where the outbox writes: one that writes a disk does it
    /// on its own thread, in order with commits, so that the caller (a delivering loop on the
    /// pipeline's thread) is not held through an fsync. `body` runs once, even when the caller is
    /// cancelled meanwhile.
    func write<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T
    /// Moves records to the dead letters with the peer's answer (a rejection retrying cannot fix).
    func deadLetter(_ records: [OutboxRecord], status: Int, answer: String, at now: Timestamp) throws
    /// Drops records whose age origin is before `cutoff`; returns how many.
    func dropOlder(than cutoff: Timestamp) throws -> Int
    /// The highest queued seq with this key, nil when none (for "retain only the newest per topic").
    func newestSeq(forKey key: String) throws -> Int64?
    /// Records waiting.
    var depth: Int { get }
    /// Age origin of the oldest waiting record.
    var oldestEnqueuedAt: Int64? { get }
    /// Records up to this seq were sent in a request not yet settled; kept across a restart so the
    /// same batch (with the same Idempotency-Key) is sent again first.
    var inFlightThrough: Int64? { get }
    /// Notes that records up to `seq` are being sent; forgotten when they leave the queue.
    /// `durably`: synced before it returns, so it survives a power cut (a batch whose records
    /// could be read differently after a restart: a partial one); otherwise, like a removal,
    /// written to the operating system.
    func markInFlight(through seq: Int64, durably: Bool) throws
    /// Dead letters kept (0 for the memory outbox, which keeps none).
    func deadLetterCount() throws -> Int
    /// Finishes writing and releases the file (a clean exit leaves no WAL behind). Idempotent;
    /// nothing may be called after it.
    func close()
}

extension Outbox {
    /// In memory, appending is quick: done where it is called.
    public func commit(_ entries: [OutboxEntry], at now: Timestamp) async throws -> Int {
        try append(entries, at: now)
    }

    /// Two writes; in memory nothing is gained by joining them.
    public func remove(through seq: Int64, markingInFlight next: Int64?, durably: Bool) throws {
        try remove(through: seq)
        if let next { try markInFlight(through: next, durably: durably) }
    }

    /// In memory, writing is quick: done where it is called.
    public func write<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try body()
    }

    /// In memory, removing is quick: done where it is called.
    public func remove(_ seqs: [Int64], done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        done(Result { try remove(seqs) })
    }

    /// Up to `limit` records from the front.
    public func oldest(limit: Int) throws -> [OutboxRecord] { try records(after: 0, limit: limit) }
}

/// Why an outbox failed: its location and SQLite's (or the system's) reason.
public struct OutboxError: Error, CustomStringConvertible {
    public var path: String
    public var message: String
    /// True when the disk (or the file's quota) is full: the write may succeed once space is freed.
    public var isDiskFull: Bool

    public init(path: String, message: String, isDiskFull: Bool = false) {
        self.path = path
        self.message = message
        self.isDiskFull = isDiskFull
    }

    public var description: String { "queue \(path): \(message)" }
}

/// Where a queued record's age (for `queue.max_age`) counts from.
public enum OutboxAge {
    /// The later of its fix time and its commit time. The fix time covers a device whose clock is
    /// not set yet (a Raspberry Pi without RTC commits in 1970; when NTP steps its clock, fresh
    /// fixes must not look 56 years old); the commit time covers replays of old logs and receivers
    /// whose dates are off by 1024 weeks (their fixes must not look expired on arrival).
    public static func origin(fix: Int64?, commit: Int64) -> Int64 {
        max(fix ?? commit, commit)
    }
}
