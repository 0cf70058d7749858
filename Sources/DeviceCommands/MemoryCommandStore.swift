import GatewayCore
import Locking

/// Commands kept in memory only: a restart forgets them (logged at start). What a gateway uses
/// without a state directory, and what tests use.
public final class MemoryCommandStore: CommandStore {
    private let state = Locked<(commands: [String: DeviceCommand], devices: [String: String])>(([:], [:]))

    public init() {}

    public var location: String { "memory (forgotten at a restart)" }

    public func load() throws -> [DeviceCommand] { state.withLock { Array($0.commands.values) } }

    public func save(_ command: DeviceCommand, expecting: CommandStatus?) throws {
        try state.withLock { s in
            if let expecting, let stored = s.commands[command.id], stored.status != expecting {
                throw CommandError.conflict("command \(command.id) is \(stored.status.rawValue), not \(expecting.rawValue)")
            }
            s.commands[command.id] = command
        }
    }

    public func loadDevices() throws -> [String: String] { state.withLock { $0.devices } }

    public func saveDevice(_ device: String, source: String) throws { state.withLock { $0.devices[device] = source } }

    public func purge(before: Timestamp) throws {
        state.withLock { s in
            s.commands = s.commands.filter { !$0.value.status.isFinal || ($0.value.history.last?.time ?? $0.value.created) >= before }
        }
    }

    public func close() {}
}
