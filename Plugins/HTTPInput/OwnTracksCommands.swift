import DeviceIntake
import GatewayCore
import Locking

/// Commands to OwnTracks phones. The app posts its locations and reads the array it is answered
/// with, so commands ride in the answer to its next request: a `cmd` message each.
///
/// | type | message |
/// |---|---|
/// | `position_now` | `{"_type": "cmd", "action": "reportLocation"}` |
/// | `set_interval` | `{"_type": "cmd", "action": "setConfiguration", "configuration": {"_type": "configuration", "locatorInterval": <s>}}` |
/// | `custom` | `data`: a JSON object, sent as it is (any `cmd` the app takes) |
///
/// OwnTracks confirms nothing: a command is `delivered` once the answer carrying it was handed to
/// the HTTP server, and then never goes again. One cancelled or expired before the phone's next
/// request is taken back (``withdraw(_:)``) and never reaches it.
final class OwnTracksCommandLink: CommandLink, Sendable {
    static let types: Set<CommandType> = [.positionNow, .setInterval, .custom]

    private let waiting = Locked<[DeviceCommand]>([])

    /// Called by the command center: the command waits for the phone's next answer.
    func send(_ command: DeviceCommand) { waiting.withLock { $0.append(command) } }

    func withdraw(_ id: String) -> Bool {
        waiting.withLock { w in
            guard let i = w.firstIndex(where: { $0.id == id }) else { return false }
            w.remove(at: i)
            return true
        }
    }

    /// The commands waiting, taken.
    func take() -> [DeviceCommand] {
        waiting.withLock { w in
            defer { w.removeAll() }
            return w
        }
    }

    /// The `cmd` message of a command, or nil when it cannot be one.
    static func message(_ command: DeviceCommand) -> JSONValue? {
        switch command.type {
        case .positionNow:
            return .object(JSONObject([("_type", .string("cmd")), ("action", .string("reportLocation"))]))
        case .setInterval:
            guard let seconds = CommandRequest.intervalSeconds(command.parameters) else { return nil }
            let configuration = JSONValue.object(JSONObject([("_type", .string("configuration")), ("locatorInterval", .number(Double(seconds)))]))
            return .object(JSONObject([("_type", .string("cmd")), ("action", .string("setConfiguration")), ("configuration", configuration)]))
        case .custom:
            guard let text = command.parameters["data"], let value = try? JSONValue.parse(string: text), case .object = value else { return nil }
            return value
        case .text, .engineStop, .engineResume, .reboot:
            return nil
        }
    }
}
