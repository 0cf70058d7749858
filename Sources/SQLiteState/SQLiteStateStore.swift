import Dispatch
import GatewayCore
import Locking
import SQLiteStorage
import SystemIO
#if canImport(Glibc)
import Glibc
import EnvironmentChecks
#endif

/// Per-device state of stateful transforms in an SQLite file (`settings.state`), written on a
/// thread of its own, never the pipeline's.
///
/// One table, `device_state` (transform, device, format, state as JSON text, updated_ms), one row
/// per transform and device. Writes gather: every change handed in while a transaction commits
/// goes into the next one, so one fsync serves every batch that came meanwhile (group commit),
/// and with `interval` the store waits that long first to gather more. A change whose sequence is
/// older than the one last written for its row is skipped (acknowledgements that came out of
/// order). A full disk is waited out (the changes stay pending, logged once a minute); other
/// errors are handed to the writers' completions.
///
/// The file is locked (`flock`) while open: a second gateway on the same state, or
/// `locgate state forget` against a running gateway, is refused.
public final class SQLiteStateStore: DeviceStateStore {
    private struct Pending {
        var changes: [DeviceStateRecord]
        var sequence: UInt64
        var completion: @Sendable ((any Error)?) -> Void
    }

    private struct State {
        var pending: [Pending] = []
        /// A commit is queued for writes someone waits for (at once, or after `interval`).
        var scheduled = false
        /// A commit is queued for lazy writes (after `lazyDelay`).
        var scheduledLazily = false
        var closed = false
        /// The sequence and size last written per row ("transform\u{0}device"), for ordering and sizes.
        var written: [String: (sequence: UInt64, bytes: Int)] = [:]
        /// Devices and bytes per transform, kept with `written`.
        var totals: [String: (devices: Int, bytes: Int)] = [:]
        var writes = 0
        var transactions = 0

        mutating func record(transform: String, device: String, sequence: UInt64, bytes: Int?) {
            let key = transform + "\u{0}" + device
            var t = totals[transform] ?? (0, 0)
            if let old = written[key] { t.devices -= 1; t.bytes -= old.bytes }
            if let bytes {
                written[key] = (sequence, bytes)
                t.devices += 1
                t.bytes += bytes
            } else {
                written[key] = nil
            }
            totals[transform] = t
        }
        var diskFullLog = LogRateLimit()
    }

    public let path: String
    public var location: String { FileCheck.absolute(path) }
    private let interval: Duration
    private let maxAge: Duration
    private let queue = DispatchQueue(label: "locgate-state")
    private let state = Locked(State())
    // Only touched on `queue` (and in init/close before/after it runs); nil once closed.
    nonisolated(unsafe) private var connection: SQLiteConnection?
    nonisolated(unsafe) private var lastExpiry: Int64 = 0
    /// The file's lock, released on close.
    private let fileLock: SQLiteFileLock
    private let faults: @Sendable (String) -> Void
    private let clock: any GatewayClock

    /// Opens (or creates) the store, locks it and forgets state older than `maxAge`.
    /// `faults` hears problems the store waits out (a full disk).
    public init(path: String, interval: Duration = .zero, maxAge: Duration = StateSettings.defaultMaxAge, clock: any GatewayClock = .system,
                faults: @escaping @Sendable (String) -> Void = { _ in }) throws(StateFileError) {
        self.path = path
        self.clock = clock
        self.interval = interval
        self.maxAge = maxAge
        self.faults = faults
        let absolute = FileCheck.absolute(path)
        let c: SQLiteConnection
        do { (c, fileLock) = try SQLiteFileLock.open(path: path, holder: "state store") } catch { throw StateFileError(path: absolute, message: error.message) }
        connection = c
        do {
            try SQLiteStateStore.createSchema(c)
            try expire(now: clock.now().milliseconds)
        } catch {
            // Closing also unlocks; the deinit that follows a throw finds the store closed.
            close()
            throw StateFileError(path: absolute, message: "\(error)")
        }
    }

    deinit { close() }

    private static func createSchema(_ c: SQLiteConnection) throws {
        try c.execute("""
            CREATE TABLE IF NOT EXISTS device_state (
                transform TEXT NOT NULL,
                device TEXT NOT NULL,
                format TEXT NOT NULL,
                state TEXT NOT NULL,
                updated_ms INTEGER NOT NULL,
                PRIMARY KEY (transform, device)) WITHOUT ROWID
            """)
        try c.execute("CREATE INDEX IF NOT EXISTS device_state_age ON device_state (updated_ms)")
    }

    // MARK: - Reading

    public func load(transform: String) throws -> [DeviceStateRecord] {
        try queue.sync {
            guard let c = connection else { throw SQLiteError.misuse("the state store is closed") }
            let rows = try SQLiteStateStore.rows(c, transform: transform)
            state.withLock { s in
                for (r, bytes) in rows { s.record(transform: r.transform, device: r.device, sequence: 0, bytes: bytes) }
            }
            return rows.map(\.record)
        }
    }

    /// Devices and bytes of state stored for one transform (the gauges `state.devices`, `state.bytes`):
    /// each row counts its device id and its state's text.
    public func totals(transform: String) -> (devices: Int, bytes: Int)? {
        state.withLock { $0.totals[transform] ?? (0, 0) }
    }

    /// Rows written so far (the counter `state.writes` is kept per transform by the runtime).
    public var writes: Int { state.withLock { $0.writes } }
    /// Transactions committed so far: fewer than the writes handed in when they gathered.
    public var transactions: Int { state.withLock { $0.transactions } }

    /// The rows of one transform (or all), each with what it counts for in `state.bytes`.
    static func rows(_ c: SQLiteConnection, transform: String?) throws -> [(record: DeviceStateRecord, bytes: Int)] {
        let s = try c.statement(transform == nil
            ? "SELECT transform, device, format, state, updated_ms FROM device_state ORDER BY transform, device"
            : "SELECT transform, device, format, state, updated_ms FROM device_state WHERE transform = ?1 ORDER BY device")
        if let transform { try s.bind(1, transform) }
        var out: [(record: DeviceStateRecord, bytes: Int)] = []
        while try s.step() {
            let text = s.bytes(3)
            let device = s.text(1)
            // A row that is not JSON (written by hand) restores nothing; the transform logs it.
            let value = (try? JSONValue.parse(text)) ?? .string(String(decoding: text, as: UTF8.self))
            out.append((DeviceStateRecord(transform: s.text(0), device: device, format: s.text(2), state: value, updatedMilliseconds: s.int(4)),
                        device.utf8.count + text.count))
        }
        return out
    }

    // MARK: - Writing

    /// How long writes nobody waits for are gathered: a crash of a source that cannot replay
    /// (serial, a file) loses at most this much of its devices' state; each commit's fsync costs
    /// CPU time in the kernel, and a replay at full speed would otherwise commit every few ms.
    public static let lazyDelay: Duration = .milliseconds(250)

    public func writeLazily(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void) {
        enqueue(Pending(changes: changes, sequence: sequence, completion: completion), lazily: true)
    }

    public func write(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void) {
        enqueue(Pending(changes: changes, sequence: sequence, completion: completion), lazily: false)
    }

    /// Adds a write to what the next commit takes, and schedules that commit unless one that
    /// comes soon enough is already queued: a write someone waits for goes at once (or after
    /// `interval`), a lazy one after `lazyDelay` (or `interval` if longer).
    private func enqueue(_ pending: Pending, lazily: Bool) {
        enum Step { case refused, queued, schedule }
        let step: Step = state.withLock { s in
            if s.closed { return .refused }
            s.pending.append(pending)
            if s.scheduled || (lazily && s.scheduledLazily) { return .queued }
            if lazily { s.scheduledLazily = true } else { s.scheduled = true }
            return .schedule
        }
        switch step {
        case .refused: pending.completion(SQLiteError.misuse("the state store is closed"))
        case .queued: break
        case .schedule:
            let delay = lazily ? max(interval, Self.lazyDelay) : interval
            if delay > .zero {
                queue.asyncAfter(deadline: .now() + .milliseconds(Int(delay.milliseconds))) { self.commit() }
            } else {
                queue.async { self.commit() }
            }
        }
    }

    /// On `queue`: writes everything pending in one transaction.
    private func commit() {
        let batch: [Pending] = state.withLock { s in
            s.scheduled = false
            s.scheduledLazily = false
            defer { s.pending = [] }
            return s.pending
        }
        guard !batch.isEmpty else { return }
        guard let c = connection else {
            for p in batch { p.completion(SQLiteError.misuse("the state store is closed")) }
            return
        }
        let now = clock.now().milliseconds
        // Latest change per row, in sequence order; older ones are overwritten or skipped. Read
        // in place under the lock: a copy of `written` would be copied again at the next change.
        var rows: [String: (record: DeviceStateRecord, sequence: UInt64)] = [:]
        state.withLock { s in
            for p in batch.sorted(by: { $0.sequence < $1.sequence }) {
                for r in p.changes {
                    let key = r.transform + "\u{0}" + r.device
                    if let w = s.written[key], w.sequence > p.sequence { continue }
                    rows[key] = (r, p.sequence)
                }
            }
        }
        // Each state's text once: written to the row, and its size kept for `state.bytes`.
        var texts: [String: String] = [:]
        for (key, row) in rows { texts[key] = row.record.state?.jsonText }
        do {
            try c.transaction {
                for (key, row) in rows {
                    let r = row.record
                    if let text = texts[key] {
                        let s = try c.statement("INSERT OR REPLACE INTO device_state (transform, device, format, state, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5)")
                        try s.bind(1, r.transform)
                        try s.bind(2, r.device)
                        try s.bind(3, r.format)
                        try s.bind(4, text)
                        try s.bind(5, now)
                        try s.stepDone()
                    } else {
                        let s = try c.statement("DELETE FROM device_state WHERE transform = ?1 AND device = ?2")
                        try s.bind(1, r.transform)
                        try s.bind(2, r.device)
                        try s.stepDone()
                    }
                }
                if now - lastExpiry >= 3_600_000 { try expire(now: now) }
            }
        } catch let error as SQLiteError where error.isDiskFull {
            // Back in front of what came meanwhile, tried again in a second.
            let (retry, suppressed): (Bool, Int?) = state.withLock { s in
                s.pending.insert(contentsOf: batch, at: 0)
                let suppressed = s.diskFullLog.allow("full", now: now)
                if s.scheduled || s.closed { return (false, suppressed) }
                s.scheduled = true
                return (true, suppressed)
            }
            if let suppressed {
                faults("state store: disk full, waiting to write \(rows.count) device state(s): \(error.message)\(LogRateLimit.suffix(suppressed))")
            }
            if retry { queue.asyncAfter(deadline: .now() + .seconds(1)) { self.commit() } }
            return
        } catch {
            for p in batch { p.completion(error) }
            return
        }
        state.withLock { s in
            s.writes += rows.count
            s.transactions += 1
            for (key, row) in rows {
                let r = row.record
                s.record(transform: r.transform, device: r.device, sequence: row.sequence,
                         bytes: texts[key].map { r.device.utf8.count + $0.utf8.count })
            }
        }
        for p in batch { p.completion(nil) }
    }

    /// Forgets state not written for `maxAge`.
    private func expire(now: Int64) throws {
        guard let c = connection else { return }
        let s = try c.statement("DELETE FROM device_state WHERE updated_ms < ?1")
        try s.bind(1, now - maxAge.milliseconds)
        try s.stepDone()
        lastExpiry = now
    }

    // MARK: - Closing

    /// Writes what is pending, then closes the database and releases the lock.
    public func close() {
        let first = state.withLock { s -> Bool in
            defer { s.closed = true }
            return !s.closed
        }
        guard first else { return }
        // What is pending is written now, not after `interval`; what a full disk still holds
        // back is not retried after close: its writers hear so.
        let left: [Pending] = queue.sync {
            commit()
            connection?.close()
            connection = nil
            return state.withLock { s in defer { s.pending = [] }; return s.pending }
        }
        for p in left { p.completion(SQLiteError.misuse("the state store closed before this state could be written")) }
        fileLock.release()
    }
}

extension SQLiteStateStore {
    /// For `locgate validate`: why the store at `path` could not be opened (its directory), or nil.
    public static func problem(path: String) -> String? {
        FileCheck.directoryProblem(FileCheck.directory(of: path))
    }
    /// Every record in the store at `path`, read without taking the lock (a running gateway's
    /// store can be read): for `locgate state list|show`.
    public static func read(path: String) throws(StateFileError) -> [DeviceStateRecord] {
        let absolute = FileCheck.absolute(path)
        guard access(path, F_OK) == 0 else { throw StateFileError(path: absolute, message: "no state store here") }
        do {
            let c = try SQLiteConnection(path: path, readOnly: true)
            defer { c.close() }
            return try rows(c, transform: nil).map(\.record)
        } catch {
            throw StateFileError(path: absolute, message: "\(error)")
        }
    }

    /// Deletes every transform's state of `device`; refused while a gateway holds the store.
    /// Returns the rows deleted.
    public static func forget(device: String, path: String) throws(StateFileError) -> Int {
        let absolute = FileCheck.absolute(path)
        guard access(path, F_OK) == 0 else { throw StateFileError(path: absolute, message: "no state store here") }
        let store = try SQLiteStateStore(path: path, maxAge: .seconds(Int64.max / 2_000))
        defer { store.close() }
        do {
            return try store.queue.sync {
                guard let c = store.connection else { return 0 }
                let s = try c.statement("DELETE FROM device_state WHERE device = ?1")
                try s.bind(1, device)
                try s.stepDone()
                return c.changes
            }
        } catch {
            throw StateFileError(path: absolute, message: "\(error)")
        }
    }
}

/// A state file that cannot be opened, read or changed: its absolute path and the reason.
public struct StateFileError: Error, CustomStringConvertible {
    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "state store \(path): \(message)" }
}
