import EnvironmentChecks
import GatewayCore
import Locking
import SQLiteStorage

/// A gateway's commands to devices in an SQLite file (`settings.commands.path`): one row per
/// command (its JSON, as the API shows it) and one per device seen connected, with its source.
///
/// Every write is its own transaction with `synchronous=FULL`: a command marked sent is on disk
/// before its bytes go to the device, so a crash at any point sends it again or not at all, never
/// loses it. Commands are few (an operator's or a rule's), so nothing is gathered. The file is
/// locked (`flock`) while open: two gateways on one file would both send.
public final class SQLiteCommandStore: CommandStore {
    public let path: String
    public var location: String { FileCheck.absolute(path) }
    /// Used under `lock` only; nil once closed.
    nonisolated(unsafe) private var connection: SQLiteConnection?
    private let lock = Locked(())
    /// The file's lock, released on close.
    private let fileLock: SQLiteFileLock
    private let clock: any GatewayClock

    /// Opens (or creates) the file and locks it.
    public init(path: String, clock: any GatewayClock) throws(CommandFileError) {
        self.path = path
        self.clock = clock
        let c: SQLiteConnection
        do { (c, fileLock) = try SQLiteFileLock.open(path: path, holder: "command store") } catch {
            throw CommandFileError(path: FileCheck.absolute(path), message: error.message)
        }
        do {
            try c.execute("""
                CREATE TABLE IF NOT EXISTS commands (
                    id TEXT PRIMARY KEY, device TEXT NOT NULL, status TEXT NOT NULL,
                    updated_ms INTEGER NOT NULL, body TEXT NOT NULL) WITHOUT ROWID
                """)
            try c.execute("CREATE INDEX IF NOT EXISTS commands_device ON commands (device)")
            try c.execute("""
                CREATE TABLE IF NOT EXISTS command_devices (
                    device TEXT PRIMARY KEY, source TEXT NOT NULL, seen_ms INTEGER NOT NULL) WITHOUT ROWID
                """)
            connection = c
        } catch {
            c.close()
            fileLock.release()
            throw CommandFileError(path: FileCheck.absolute(path), message: "\(error)")
        }
    }

    deinit { close() }

    public func close() {
        let closed: Bool = lock.withLock { _ in
            guard let open = connection else { return false }
            open.close()
            connection = nil
            return true
        }
        if closed { fileLock.release() }
    }

    private func with<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try lock.withLock { _ in
            guard let c = connection else { throw SQLiteError.misuse("the command store is closed") }
            return try body(c)
        }
    }

    public func load() throws -> [DeviceCommand] {
        try with { c in
            let s = try c.statement("SELECT body FROM commands")
            var out: [DeviceCommand] = []
            while try s.step() {
                // A row that is not a command (written by hand) is left out.
                if let value = try? JSONValue.parse(s.bytes(0)), let command = DeviceCommand(json: value) { out.append(command) }
            }
            return out
        }
    }

    public func save(_ command: DeviceCommand, expecting: CommandStatus?) throws {
        try with { c in
            try c.transaction {
                if let expecting {
                    let q = try c.statement("SELECT status FROM commands WHERE id = ?1")
                    try q.bind(1, command.id)
                    let stored = try q.step() ? q.text(0) : nil
                    q.release()
                    if let stored, stored != expecting.rawValue {
                        throw CommandError.conflict("command \(command.id) is \(stored), not \(expecting.rawValue)")
                    }
                }
                let s = try c.statement("INSERT OR REPLACE INTO commands (id, device, status, updated_ms, body) VALUES (?1, ?2, ?3, ?4, ?5)")
                try s.bind(1, command.id)
                try s.bind(2, command.device)
                try s.bind(3, command.status.rawValue)
                try s.bind(4, (command.history.last?.time ?? command.created).milliseconds)
                try s.bind(5, command.json.jsonText)
                try s.stepDone()
            }
        }
    }

    public func loadDevices() throws -> [String: String] {
        try with { c in
            let s = try c.statement("SELECT device, source FROM command_devices")
            var out: [String: String] = [:]
            while try s.step() { out[s.text(0)] = s.text(1) }
            return out
        }
    }

    public func saveDevice(_ device: String, source: String) throws {
        try with { c in
            let s = try c.statement("INSERT OR REPLACE INTO command_devices (device, source, seen_ms) VALUES (?1, ?2, ?3)")
            try s.bind(1, device)
            try s.bind(2, source)
            try s.bind(3, clock.now().milliseconds)
            try s.stepDone()
        }
    }

    public func purge(before: Timestamp) throws {
        try with { c in
            let s = try c.statement("DELETE FROM commands WHERE status IN ('done', 'failed', 'delivered', 'expired', 'cancelled') AND updated_ms < ?1")
            try s.bind(1, before.milliseconds)
            try s.stepDone()
        }
    }
}

/// A command file that cannot be opened: its absolute path and the reason.
public struct CommandFileError: Error, CustomStringConvertible {
    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "command store \(path): \(message)" }
}
