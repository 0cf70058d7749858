import Dispatch
import GatewayCore
import Locking
import NATSClient
#if canImport(Glibc)
import Glibc
#endif

/// Per-device state of stateful transforms in a NATS JetStream Key-Value bucket
/// (`settings.state.nats`), shared by partitioned aggregators: a partition moved to another
/// aggregator takes its devices' state along.
///
/// One key per transform and device, `<transform>.<device>` (``StateKeys``), whose value is
/// `{"format": …, "updated_ms": …, "writer": …, "state": …}`. Writes run on a queue of their own, never the
/// pipeline's threads, and gather like the SQLite store's: every change handed in while a round
/// of writes is under way goes into the next round, one write per key (its latest change). A
/// write completes once the bucket's stream acknowledged every key of it.
///
/// Compare-and-swap: the store remembers each key's revision (from `load` and from its own
/// writes) and writes with `kvStore_Update` naming it, or `kvStore_Create` for a key it has not
/// seen. When the server has another revision, another gateway wrote that device's state (two
/// aggregators believe they own its partition): the write is refused, not retried, and every
/// later write of that key is refused too, so the other gateway's state stays; the completion
/// gets ``DeviceStateStoreError/conflict(devices:detail:)`` (the runtime counts
/// `state.conflicts`, logs it and stops the source that fed the device). A nil state deletes
/// the key (after checking that its revision is still ours: nats.c 3.4 has no compare-and-swap
/// delete, so a write racing that check is the one overwrite left).
///
/// A write that failed for another reason (no leader during an election, a disconnect) stays
/// pending and is tried again a second later, holding the acknowledgements upstream (logged
/// once a minute). Since a write that timed out may still have been stored, a key whose write
/// failed is read back first: the value it wrote means the write took. That read can come too
/// early (the write was still in flight, and lands after it) or from a replica that is behind,
/// so the next write can be refused by the store's own earlier value: a refusal of a key with
/// such writes is checked against the stream leader's value before it counts as a conflict.
public final class NATSKeyValueStateStore: DeviceStateStore {
    struct Pending {
        var changes: [DeviceStateRecord]
        var sequence: UInt64
        var completion: @Sendable ((any Error)?) -> Void
    }

    public let location: String
    /// Random, one per store: in every value it writes, so that a value read back is known for
    /// its own only when this store wrote it. Two aggregators on one partition compute the same
    /// state, and could write it in the same millisecond: without it, one would take the other's
    /// write for its own unanswered one and overwrite it.
    let writer = String(UInt64.random(in: .min ... .max), radix: 16)
    private let connection: NATSConnection
    private let bucket: any StateBucket
    private let interval: Duration
    private let timeout: Duration
    private let queue = DispatchQueue(label: "locgate-state-nats")
    private let state = Locked(State())
    private let clock: any GatewayClock
    private let logger: Logger

    /// Connects (waiting up to `configuration.timeout`), binds the bucket or creates it with the
    /// asked replicas (default 3, at most the servers the cluster has) and `maxAge` as its TTL.
    public convenience init(_ configuration: NATSStateConfiguration, interval: Duration = .zero, maxAge: Duration = StateSettings.defaultMaxAge,
                            context: StateStoreContext) throws {
        try self.init(configuration, interval: interval, maxAge: maxAge, context: context, bucket: { $0 })
    }

    /// `bucket` stands between the store and the bucket it bound: tests wrap it to choose when
    /// a write that got no answer lands.
    init(_ configuration: NATSStateConfiguration, interval: Duration, maxAge: Duration, context: StateStoreContext,
         bucket wrap: (NATSKeyValueBucket) -> any StateBucket) throws {
        var options = configuration.connection
        options.name = "locgate state"
        let logger = context.logger
        // Each request waits at most a few seconds and is tried again until `timeout`: one sent to a
        // stream leader that just died is lost, and the next goes to its successor.
        let apiTimeout = min(configuration.timeout, NATSKeyValueStateStore.requestTimeout)
        let connection = try NATSConnection.connectNow(options, jetStream: NATSJetStreamSettings(apiTimeout: apiTimeout)) { event in
            switch event {
            case .disconnected: logger.warning("state store: disconnected from NATS; reconnecting (state writes wait)")
            case .reconnected(let url): logger.info("state store: reconnected to \(url)")
            case .asyncError(let text): logger.warning("state store: NATS error: \(text)")
            default: break
            }
        }
        guard connection.waitUntilConnectedNow(timeout: configuration.timeout) else {
            throw DeviceStateStoreError.unavailable("no server of \(options.servers.joined(separator: ", ")) answered within \(DurationText.format(configuration.timeout))")
        }
        let servers = Set(connection.knownServers).count
        let replicas = configuration.replicas ?? max(1, min(3, servers))
        let wanted = NATSKeyValueConfig(bucket: configuration.bucket, replicas: replicas, ttl: maxAge)
        // A cluster that has just started may not have placed streams yet: try for the timeout.
        let deadline = context.clock.now().milliseconds + configuration.timeout.milliseconds
        var bound: (bucket: NATSKeyValueBucket, created: Bool)?
        while bound == nil {
            do {
                bound = try connection.keyValueNow(wanted)
            } catch {
                if context.clock.now().milliseconds >= deadline { throw error }
                usleep(200_000)
            }
        }
        guard let bound else { throw DeviceStateStoreError.unavailable("bucket \(configuration.bucket) could not be bound") }
        if bound.created {
            logger.info("created key-value bucket \(configuration.bucket) (\(replicas) replica(s), TTL \(DurationText.format(maxAge)))")
        }
        self.connection = connection
        self.bucket = wrap(bound.bucket)
        self.location = "nats bucket \(configuration.bucket)"
        self.interval = interval
        self.timeout = configuration.timeout
        self.clock = context.clock
        self.logger = logger
    }

    deinit { close() }

    /// The longest one request waits before it is sent again.
    static let requestTimeout: Duration = .seconds(3)

    /// The most values of unanswered writes kept per key (refused ones are not kept: a refusal
    /// is an answer). A write lands, if at all, once the stall or election that held its answer
    /// is over; the bound keeps a long outage, one unanswered write a round, from piling up
    /// values, and the oldest are the ones kept.
    static let uncertainKept = 16

    // MARK: - Reading

    public func load(transform: String) throws -> [DeviceStateRecord] {
        try queue.sync {
            if state.withLock({ $0.closed }) { throw DeviceStateStoreError.unavailable("the state store is closed") }
            var records: [DeviceStateRecord] = []
            // During a leader election the watch's consumer cannot be created: try until `timeout`.
            let deadline = clock.now().milliseconds + timeout.milliseconds
            var entries: [NATSKeyValueEntry] = []
            while true {
                do {
                    // Every key (the leader's last sequence may be any transform's), then this transform's.
                    entries = try readCurrent(">", until: deadline).filter { !$0.deleted }
                    break
                } catch {
                    if clock.now().milliseconds >= deadline { throw error }
                    logger.debug("state store: reading \(transform) again: \(error)")
                    usleep(250_000)
                }
            }
            state.withLock { s in
                for e in entries {
                    guard let (t, device) = StateKeys.parts(of: e.key), t == transform else { continue }
                    let record = NATSKeyValueStateStore.record(transform: t, device: device, value: e.value)
                    s.account(transform: t, key: e.key, bytes: e.value.count)
                    // A reload reads again: what this store wrote since is newer than nothing.
                    s.keys[e.key, default: KeyState()].revision = e.revision
                    s.keys[e.key, default: KeyState()].conflicted = false
                    records.append(record)
                }
            }
            return records.sorted { $0.device < $1.device }
        }
    }

    /// On `queue`: every key of the bucket as the stream's leader has it. The watch that reads
    /// the bucket may be served by any replica, and one that is behind (just restarted after a
    /// kill -9, in the 3-node test) answers with older values, which would restore old state and
    /// then fail every compare-and-swap. So the read is repeated until it reaches the last
    /// sequence the leader reported before it began (writes meanwhile only add to it).
    private func readCurrent(_ filter: String, until deadline: Int64) throws -> [NATSKeyValueEntry] {
        let stream = "KV_" + bucket.name
        var behind = ""
        while true {
            let leader = try connection.streamInfoNow(stream)
            let entries = try bucket.entries(matching: filter, timeout: min(timeout, Self.requestTimeout))
            guard let leader, leader.messages > 0 else { return entries }
            let newest = entries.map(\.revision).max() ?? 0
            if newest >= leader.lastSequence { return entries }
            behind = "read up to revision \(newest), the leader has \(leader.lastSequence)"
            if clock.now().milliseconds >= deadline {
                logger.warning("state store: reading \(location) from a replica that is behind (\(behind)): old state may be restored, and its writes then fail as conflicts")
                return entries
            }
            usleep(100_000)
        }
    }

    /// The record a value holds; a value that is not ours restores nothing (the transform logs it).
    private static func record(transform: String, device: String, value: [UInt8]) -> DeviceStateRecord {
        guard let v = try? JSONValue.parse(value), case .object(let o) = v, let format = o["format"]?.stringValue else {
            return DeviceStateRecord(transform: transform, device: device, format: "", state: .string(String(decoding: value, as: UTF8.self)))
        }
        var updated: Int64 = 0
        if case .number(let n)? = o["updated_ms"], n.isFinite, abs(n) < 9e15 { updated = Int64(n) }
        return DeviceStateRecord(transform: transform, device: device, format: format, state: o["state"] ?? .null, updatedMilliseconds: updated)
    }

    public func totals(transform: String) -> (devices: Int, bytes: Int)? {
        state.withLock { $0.totals[transform] ?? (0, 0) }
    }

    /// Keys written so far.
    public var writes: Int { state.withLock { $0.writes } }
    /// Rounds of writes so far: fewer than the writes handed in when they gathered.
    public var rounds: Int { state.withLock { $0.rounds } }
    /// Writes refused because another gateway wrote the key.
    public var conflicts: Int { state.withLock { $0.conflicts } }

    // MARK: - Writing

    public func write(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void) {
        let schedule: Bool? = state.withLock { s in
            if s.closed { return nil }
            s.pending.append(Pending(changes: changes, sequence: sequence, completion: completion))
            if s.scheduled { return false }
            s.scheduled = true
            return true
        }
        guard let schedule else { return completion(DeviceStateStoreError.unavailable("the state store is closed")) }
        guard schedule else { return }
        if interval > .zero {
            queue.asyncAfter(deadline: .now() + .milliseconds(Int(interval.milliseconds))) { self.commit(final: false) }
        } else {
            queue.async { self.commit(final: false) }
        }
    }

    /// What one key's write came to.
    private enum Outcome {
        case written
        case conflict(String)
        case failed(any Error)
    }

    /// On `queue`: writes everything pending, one write per key. `final` (at close): what cannot
    /// be written now fails instead of waiting.
    private func commit(final: Bool) {
        let batch: [Pending] = state.withLock { s in
            s.scheduled = false
            defer { s.pending = [] }
            return s.pending
        }
        guard !batch.isEmpty else { return }
        let now = clock.now().milliseconds
        // Latest change per key, in sequence order; older ones are overwritten or skipped.
        var rows: [String: (record: DeviceStateRecord, sequence: UInt64)] = [:]
        let known = state.withLock { $0.keys }
        for p in batch.sorted(by: { $0.sequence < $1.sequence }) {
            for r in p.changes {
                let key = StateKeys.key(transform: r.transform, device: r.device)
                if let k = known[key], k.sequence > p.sequence { continue }
                rows[key] = (r, p.sequence)
            }
        }
        var outcomes: [String: Outcome] = [:]
        var failure: (any Error)?
        for (key, row) in rows.sorted(by: { $0.key < $1.key }) {
            let outcome = write(key: key, row.record, sequence: row.sequence, now: now)
            outcomes[key] = outcome
            if case .failed(let error) = outcome { failure = error; break }
        }
        if let failure, !final {
            // Back in front of what came meanwhile, tried again in a second; what was written
            // is written again with its new revision (harmless).
            let (retry, suppressed): (Bool, Int?) = state.withLock { s in
                s.pending.insert(contentsOf: batch, at: 0)
                let suppressed = s.unavailableLog.allow("unavailable", now: now)
                if s.scheduled || s.closed { return (false, suppressed) }
                s.scheduled = true
                return (true, suppressed)
            }
            if let suppressed {
                logger.warning("state store: cannot write to \(location) now, trying again (acknowledgements upstream wait): \(failure)\(LogRateLimit.suffix(suppressed))")
            }
            if retry { queue.asyncAfter(deadline: .now() + .seconds(1)) { self.commit(final: false) } }
            return
        }
        state.withLock { s in
            s.rounds += 1
            for (_, o) in outcomes {
                switch o {
                case .written: s.writes += 1
                case .conflict: s.conflicts += 1
                case .failed: break
                }
            }
        }
        for p in batch {
            var refused: [String] = []
            var detail = ""
            var failed: (any Error)?
            for r in p.changes {
                switch outcomes[StateKeys.key(transform: r.transform, device: r.device)] {
                case .conflict(let text)?:
                    refused.append("\(r.transform)/\(r.device)")
                    detail = text
                case .failed(let error)?: failed = error
                case .written?: break
                case nil: if failure != nil { failed = failure }
                }
            }
            if !refused.isEmpty {
                p.completion(DeviceStateStoreError.conflict(devices: refused, detail: detail))
            } else if let failed {
                p.completion(failed)
            } else {
                p.completion(nil)
            }
        }
    }

    /// On `queue`: one key's compare-and-swap write (or delete).
    private func write(key: String, _ r: DeviceStateRecord, sequence: UInt64, now: Int64) -> Outcome {
        var k = state.withLock { $0.keys[key] } ?? KeyState()
        if k.conflicted { return .conflict("refused before: another gateway wrote it") }
        do {
            // Earlier writes got no answer: if the server has one of their values, it was stored.
            if !k.uncertain.isEmpty, let current = try bucket.get(key) { adopt(current, &k, key: key, transform: r.transform) }
            guard let value = r.state else {
                var current = try bucket.get(key)
                if let seen = current, seen.revision != k.revision {
                    // Before calling it another gateway's: the read may come from a replica that
                    // is behind, or show a write of ours that got no answer. The leader decides.
                    current = try bucket.latest(key).flatMap { $0.deleted ? nil : $0 }
                    if let current, current.revision != k.revision, !adopt(current, &k, key: key, transform: r.transform) {
                        return markConflict(key, "revision \(current.revision), this gateway knew \(k.revision.map(String.init) ?? "none")")
                    }
                }
                // A write of ours that got no answer may land yet: delete even when nothing shows.
                if current != nil || !k.uncertain.isEmpty {
                    state.withLock { $0.keys[key, default: KeyState()].uncertainDelete = true }
                    try bucket.delete(key)
                }
                noteDeleted(key, transform: r.transform, &k, sequence: sequence)
                return .written
            }
            let bytes = NATSKeyValueStateStore.encode(r, value: value, now: now, writer: writer)
            let earlier = k.uncertain
            var result = try attempt(key, bytes, &k, earlier: earlier)
            if case .conflict = result, !earlier.isEmpty || k.uncertainDelete {
                // The refusal may be our own doing: an earlier write (or delete) that got no
                // answer landed after the read above (still in flight when it was answered; from
                // nats-server 2.11 a write is refused at once while another of its key is in
                // flight), or that read came from a replica that is behind. If the leader has
                // one of those values, or our delete, its revision is ours and the write goes
                // again on it.
                let current = try refused(key, named: k.revision)
                if let current, adopt(current, &k, key: key, transform: r.transform) {
                    result = try attempt(key, bytes, &k, earlier: earlier)
                } else if k.uncertainDelete, current?.deleted ?? true {
                    noteDeleted(key, transform: r.transform, &k)
                    result = try attempt(key, bytes, &k, earlier: earlier)
                }
            }
            switch result {
            case .written(let revision):
                state.withLock { s in
                    s.account(transform: r.transform, key: key, bytes: bytes.count)
                    s.keys[key]?.revision = revision
                    s.keys[key]?.sequence = sequence
                    s.keys[key]?.uncertain = []
                    s.keys[key]?.uncertainDelete = false
                }
                return .written
            case .conflict(let text):
                return markConflict(key, text)
            }
        } catch {
            return .failed(error)
        }
    }

    /// On `queue`: ``put(_:_:on:)`` of `bytes` on the revision `k` knows. Until it is answered
    /// its value counts as uncertain beside `earlier` (the values of unanswered writes before
    /// it): if it throws (no answer), it may have been stored. A refusal is an answer: the value
    /// was not stored and leaves the list again. Past ``uncertainKept`` the oldest stay (from
    /// nats-server 2.11 only the first of a key's writes in flight can land).
    private func attempt(_ key: String, _ bytes: [UInt8], _ k: inout KeyState, earlier: [[UInt8]]) throws -> NATSKeyValueWrite {
        k.uncertain = Array((earlier + [bytes]).prefix(Self.uncertainKept))
        state.withLock { [k] in $0.keys[key, default: KeyState()].uncertain = k.uncertain }
        let result = try put(key, bytes, on: k.revision)
        if case .conflict = result {
            k.uncertain = earlier
            state.withLock { [k] in $0.keys[key, default: KeyState()].uncertain = k.uncertain }
        }
        return result
    }

    /// On `queue`: the compare-and-swap write naming `revision` (nil: the key has no value).
    private func put(_ key: String, _ bytes: [UInt8], on revision: UInt64?) throws -> NATSKeyValueWrite {
        try revision.map { try bucket.update(key, value: bytes, last: $0) } ?? bucket.create(key, value: bytes)
    }

    /// On `queue`: `key`'s delete by this store was stored (answered, or found at the leader):
    /// it has no value now, and the totals no longer count it. `sequence`: of the change that
    /// deleted it, when that is the one being written.
    private func noteDeleted(_ key: String, transform: String, _ k: inout KeyState, sequence: UInt64? = nil) {
        k.revision = nil
        k.uncertainDelete = false
        state.withLock { s in
            s.account(transform: transform, key: key, bytes: nil)
            s.keys[key]?.revision = nil
            s.keys[key]?.uncertainDelete = false
            if let sequence { s.keys[key]?.sequence = sequence }
        }
    }

    /// On `queue`: when `current` holds the value of one of `key`'s writes that got no answer
    /// (newer than the revision known), that write was stored: its revision becomes the known
    /// one, and the totals count its value. The uncertain values stay until a write is
    /// stored: one sent after it may still land on top of it (nats-server 2.9 checks the
    /// revision a write names before proposing it, so two proposed together both land).
    @discardableResult
    private func adopt(_ current: NATSKeyValueEntry, _ k: inout KeyState, key: String, transform: String) -> Bool {
        guard !current.deleted, current.revision > (k.revision ?? 0), k.uncertain.contains(current.value) else { return false }
        k.revision = current.revision
        state.withLock { s in
            s.account(transform: transform, key: key, bytes: current.value.count)
            s.keys[key]?.revision = current.revision
        }
        return true
    }

    /// On `queue`: `key`'s entry as the stream leader has it, after a write naming `named` (nil:
    /// none) was refused. While it still shows `named` it is read again: the refusal proves the
    /// server has something else, which the leader has not applied yet (a write still in flight
    /// refuses the next one from nats-server 2.11; a new leader catching up). Past a request
    /// timeout the write fails and is tried again later, rather than called another gateway's
    /// without that gateway's value having been seen.
    private func refused(_ key: String, named: UInt64?) throws -> NATSKeyValueEntry? {
        let deadline = clock.now().milliseconds + min(timeout, Self.requestTimeout).milliseconds
        while true {
            let current = try bucket.latest(key)
            let unchanged = named.map { current?.revision == $0 } ?? (current == nil || current?.deleted == true)
            if !unchanged { return current }
            if clock.now().milliseconds >= deadline {
                throw DeviceStateStoreError.unavailable("\(location) refused a write of key \(key) naming revision \(named.map(String.init) ?? "none"), and its stream leader still has that revision")
            }
            usleep(50_000)
        }
    }

    private func markConflict(_ key: String, _ text: String) -> Outcome {
        state.withLock { s in
            s.keys[key, default: KeyState()].conflicted = true
            s.keys[key]?.uncertain = []
        }
        return .conflict("\(location) key \(key): \(text)")
    }

    /// A value as the bucket holds it; `writer` names the store that wrote it (see ``writer``).
    static func encode(_ r: DeviceStateRecord, value: JSONValue, now: Int64, writer: String) -> [UInt8] {
        Array(JSONValue.object(JSONObject([("format", .string(r.format)), ("updated_ms", .number(Double(now))), ("writer", .string(writer)), ("state", value)])).jsonText.utf8)
    }

    // MARK: - Closing

    /// Writes what is pending (once: what fails now is reported to its writers), then closes
    /// the connection.
    public func close() {
        let first = state.withLock { s -> Bool in
            defer { s.closed = true }
            return !s.closed
        }
        guard first else { return }
        queue.sync { commit(final: true) }
        connection.closeNow()
    }
}

/// What the store needs of a Key-Value bucket: ``NATSKeyValueBucket``'s calls (see there).
protocol StateBucket: AnyObject, Sendable {
    var name: String { get }
    func entries(matching filter: String, timeout: Duration) throws -> [NATSKeyValueEntry]
    func get(_ key: String) throws -> NATSKeyValueEntry?
    func latest(_ key: String) throws -> NATSKeyValueEntry?
    func create(_ key: String, value: [UInt8]) throws -> NATSKeyValueWrite
    func update(_ key: String, value: [UInt8], last: UInt64) throws -> NATSKeyValueWrite
    func delete(_ key: String) throws
}

extension NATSKeyValueBucket: StateBucket {}
